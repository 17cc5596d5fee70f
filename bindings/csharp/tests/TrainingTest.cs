// Trains the built-in MLP through the C# binding alone and checks it against the C++ engine: the losses,
// eval loss and learning rate that bindings/mlp_losses printed for the same artifacts and batches, bit for
// bit; plus checkpoints and properties, names, parameter buffers, the scheduler, export, in-place outputs,
// tensors of every element type, errors as exceptions, and disposal in either order.
//
//   mono TrainingTest.exe ARTIFACTS_DIR REFERENCE_FILE SCRATCH_DIR
//
// Writes a JUnit file to $XML_OUTPUT_FILE (one case per check group, as Bazel counts them) and exits
// non-zero when a case fails.
using System;
using System.Collections.Generic;
using System.IO;
using System.Security;
using System.Text;
using Ontrain;

static class TrainingTest
{
    static string dir_, scratch_;
    static Dictionary<string, uint> reference_ = new Dictionary<string, uint>();
    const int Rows = 32, Inputs = 784, Steps = 12;

    class CheckFailed : Exception
    {
        public CheckFailed(string message) : base(message) { }
    }

    static void Check(bool condition, string what)
    {
        if (!condition) throw new CheckFailed(what);
    }

    static uint Bits(float f) { return BitConverter.ToUInt32(BitConverter.GetBytes(f), 0); }

    // The batch bindings/mlp_losses.cc feeds at step k (exact in float on every engine).
    static List<OrtValue> Batch(int k)
    {
        var x = new float[Rows * Inputs];
        var y = new long[Rows];
        for (long i = 0; i < x.Length; ++i) x[i] = (float)((i * 7 + k * 13) % 256 - 128) / 256.0f;
        for (long r = 0; r < Rows; ++r) y[r] = (r * 7 + k * 3) % 10;
        return new List<OrtValue> {
            OrtValue.CreateTensorValueFromMemory(x, new long[] { Rows, Inputs }),
            OrtValue.CreateTensorValueFromMemory(y, new long[] { Rows }),
        };
    }

    static void DisposeAll(List<OrtValue> values) { foreach (var v in values) v.Dispose(); }

    static string P(string name) { return Path.Combine(dir_, name); }

    static TrainingSession NewSession(CheckpointState state, string provider = "cpu")
    {
        using (var options = new SessionOptions())
        {
            options.IntraOpNumThreads = 1;
            options.AppendExecutionProvider(provider);
            return new TrainingSession(options, state, P("training_model.onnx"), P("eval_model.onnx"), P("optimizer_model.onnx"));
        }
    }

    static void Expect<E>(Action action, string messagePart, string what) where E : Exception
    {
        try
        {
            action();
        }
        catch (E e)
        {
            Check(messagePart == null || e.Message.Contains(messagePart),
                  what + ": the message \"" + e.Message + "\" does not contain \"" + messagePart + "\"");
            return;
        }
        throw new CheckFailed(what + ": no " + typeof(E).Name + " was raised");
    }

    // The C++ engine's losses, bit for bit: same artifacts, batches, schedule and thread count; on the CPU and
    // on the simulated device (the CPU's kernels, with the state on the device and every output copied back).
    static void LossesMatchTheCppEngine() { LossesMatchTheCppEngineOn("cpu"); }
    static void LossesMatchTheCppEngineOnADevice() { LossesMatchTheCppEngineOn("sim"); }

    static void LossesMatchTheCppEngineOn(string provider)
    {
        using (var state = CheckpointState.LoadCheckpoint(P("checkpoint")))
        using (var session = NewSession(state, provider))
        {
            session.RegisterLinearLRScheduler(3, Steps, 1e-3f);
            for (int k = 0; k < Steps; ++k)
            {
                var batch = Batch(k);
                using (var outputs = session.TrainStep(batch))
                {
                    Check(outputs.Count == 2, "TrainStep returns the loss and the logits");
                    float loss = outputs[0].GetTensorDataAsArray<float>()[0];
                    uint want = reference_["train " + k];
                    Check(Bits(loss) == want, string.Format("step {0}: loss bits {1:x8} ({2:R}), C++ engine {3:x8}", k, Bits(loss), loss, want));
                }
                DisposeAll(batch);
                session.OptimizerStep();
                session.SchedulerStep();
                session.LazyResetGrad();
            }
            var eval = Batch(Steps);
            using (var outputs = session.EvalStep(eval))
            {
                Check(Bits(outputs[0].GetTensorDataAsArray<float>()[0]) == reference_["eval"], "the eval loss matches the C++ engine's");
                var logits = outputs[1].GetTensorTypeAndShape();
                Check(logits.ElementDataType == TensorElementType.Float && logits.Shape.Length == 2 && logits.Shape[0] == Rows &&
                      logits.Shape[1] == 10, "eval logits are float [32, 10]");
            }
            DisposeAll(eval);
            Check(Bits(session.GetLearningRate()) == reference_["lr"], "the scheduled learning rate matches the C++ engine's");
        }
    }

    static void CheckpointsAndProperties()
    {
        string saved = Path.Combine(scratch_, "props.ckpt");
        using (var state = CheckpointState.LoadCheckpoint(P("checkpoint")))
        {
            state.AddProperty("epoch", 7L);
            state.AddProperty("best accuracy", 0.875f);
            state.AddProperty("dataset", "fashion-mnist \u00e9t\u00e9");
            CheckpointState.SaveCheckpoint(state, saved, false);
        }
        using (var state = CheckpointState.LoadCheckpoint(saved))
        {
            object epoch = state.GetProperty("epoch");
            Check(epoch is long && (long)epoch == 7, "int property round trip");
            object acc = state.GetProperty("best accuracy");
            Check(acc is float && (float)acc == 0.875f, "float property round trip");
            Check((string)state.GetProperty("dataset") == "fashion-mnist \u00e9t\u00e9", "string property round trip (UTF-8)");
            Expect<OntrainException>(() => state.GetProperty("no such property"), "no such property", "a missing property");
        }
        // From bytes, the same parameters.
        using (var a = CheckpointState.LoadCheckpoint(saved))
        using (var b = CheckpointState.LoadCheckpointFromBuffer(File.ReadAllBytes(saved)))
        using (var wa = a.GetParameter("fc1.weight"))
        using (var wb = b.GetParameter("fc1.weight"))
        {
            var da = wa.GetTensorDataAsArray<float>();
            var db = wb.GetTensorDataAsArray<float>();
            Check(da.Length == 256 * 784, "fc1.weight has 256 x 784 values");
            bool same = true;
            for (int i = 0; i < da.Length; ++i) same &= Bits(da[i]) == Bits(db[i]);
            Check(same, "a checkpoint loaded from its bytes holds the same parameters");
        }
        Expect<OntrainException>(() => CheckpointState.LoadCheckpoint(Path.Combine(scratch_, "missing.ckpt")), "missing.ckpt",
                                 "loading a checkpoint that does not exist");
        Expect<OntrainException>(() => CheckpointState.LoadCheckpointFromBuffer(new byte[] { 1, 2, 3, 4, 5, 6, 7, 8 }), null,
                                 "loading 8 bytes of garbage");
    }

    static void ParametersByName()
    {
        using (var state = CheckpointState.LoadCheckpoint(P("checkpoint")))
        {
            var info = state.GetParameterTypeAndShape("fc2.bias");
            Check(info.ElementDataType == TensorElementType.Float && info.Shape.Length == 1 && info.Shape[0] == 10, "fc2.bias is float [10]");
            var values = new float[10];
            for (int i = 0; i < 10; ++i) values[i] = i * 0.25f - 1;
            using (var v = OrtValue.CreateTensorValueFromMemory(values, new long[] { 10 }))
                state.UpdateParameter("fc2.bias", v);
            using (var back = state.GetParameter("fc2.bias"))
                Check(back.GetTensorDataAsArray<float>()[9] == 1.25f, "UpdateParameter then GetParameter");
            using (var wrong = OrtValue.CreateTensorValueFromMemory(new float[3], new long[] { 3 }))
                Expect<OntrainException>(() => state.UpdateParameter("fc2.bias", wrong), "fc2.bias", "a parameter of the wrong shape");
            Expect<OntrainException>(() => state.GetParameter("fc9.weight"), "fc9.weight", "a parameter that does not exist");
        }
    }

    static void NamesAndBuffers()
    {
        using (var state = CheckpointState.LoadCheckpoint(P("checkpoint")))
        using (var session = NewSession(state))
        {
            var inputs = session.InputNames(true);
            Check(inputs.Count == 2 && inputs[0] == "input" && inputs[1] == "labels", "training inputs: input, labels (" + string.Join(", ", inputs) + ")");
            Check(string.Join(",", session.InputNames(false)) == "input,labels", "eval inputs: input, labels");
            var outputs = session.OutputNames(true);
            Check(outputs.Count == 2 && outputs[1] == "logits", "training outputs: the loss, then logits (" + string.Join(", ", outputs) + ")");
            Check(session.OutputNames(false).Contains("logits"), "the eval model outputs logits");

            const long Parameters = 784 * 256 + 256 + 256 * 10 + 10;
            using (var all = session.ToBuffer(false))
            using (var trainable = session.ToBuffer(true))
            {
                Check(trainable.GetTensorTypeAndShape().Shape[0] == Parameters, "ToBuffer(true) holds every trainable value");
                Check(all.GetTensorTypeAndShape().Shape[0] >= Parameters, "ToBuffer(false) holds at least the trainable values");
                var flat = trainable.GetTensorDataAsArray<float>();
                for (int i = 0; i < flat.Length; ++i) flat[i] = (i % 97) * 0.001f;
                using (var changed = OrtValue.CreateTensorValueFromMemory(flat, new long[] { flat.Length }))
                    session.FromBuffer(changed);
                using (var back = session.ToBuffer(true))
                {
                    var read = back.GetTensorDataAsArray<float>();
                    bool same = read.Length == flat.Length;
                    for (int i = 0; same && i < read.Length; ++i) same = Bits(read[i]) == Bits(flat[i]);
                    Check(same, "FromBuffer then ToBuffer gives the values back");
                }
                using (var w = state.GetParameter("fc1.weight"))
                    Check(w.GetTensorDataAsArray<float>()[98] == 1 * 0.001f, "FromBuffer writes the checkpoint's parameters, in the training model's order");
            }
            using (var bad = OrtValue.CreateTensorValueFromMemory(new float[5], new long[] { 5 }))
                Expect<ArgumentException>(() => session.FromBuffer(bad), "5 elements", "a buffer of the wrong size");
        }
    }

    static void LearningRateAndScheduler()
    {
        using (var state = CheckpointState.LoadCheckpoint(P("checkpoint")))
        using (var session = NewSession(state))
        {
            session.SetLearningRate(0.245f);
            Check(session.GetLearningRate() == 0.245f, "SetLearningRate then GetLearningRate");
            Expect<InvalidOperationException>(() => session.SchedulerStep(), "scheduler", "a scheduler step without a scheduler");
            session.RegisterLinearLRScheduler(2, 4, 0.1f);
            Check(session.GetLearningRate() == 0.1f, "registering sets the initial rate");
            // ONNX Runtime's values for warm-up 2, total 4, lr 0.1, after optimizer steps 1 to 4 (the
            // schedule follows the optimizer's step count).
            float[] expected = { 0.05f, 0.1f, 0.05f, 0.0f };
            for (int k = 0; k < 4; ++k)
            {
                var batch = Batch(k);
                using (var outputs = session.TrainStep(batch)) { }
                DisposeAll(batch);
                session.OptimizerStep();
                session.LazyResetGrad();
                session.SchedulerStep();
                Check(Math.Abs(session.GetLearningRate() - expected[k]) < 1e-7f, "scheduled rate after step " + (k + 1));
            }
            Expect<InvalidOperationException>(() => session.SetLearningRate(0.5f), "scheduler", "a constant rate under a scheduler");
        }
    }

    static void OutputsInPlaceAndEvalExport()
    {
        using (var state = CheckpointState.LoadCheckpoint(P("checkpoint")))
        using (var session = NewSession(state))
        {
            session.RegisterLinearLRScheduler(3, Steps, 1e-3f);
            var batch = Batch(0);
            using (var loss = OrtValue.CreateAllocatedTensorValue(TensorElementType.Float, new long[0]))
            using (var logits = OrtValue.CreateAllocatedTensorValue(TensorElementType.Float, new long[] { Rows, 10 }))
            {
                session.TrainStep(batch, new List<OrtValue> { loss, logits });
                Check(Bits(loss.GetTensorDataAsArray<float>()[0]) == reference_["train 0"], "TrainStep into given outputs: the C++ engine's first loss");
                Check(logits.GetTensorDataAsArray<float>()[5] != 0, "the logits were written in place");
                Expect<ArgumentException>(() => session.TrainStep(batch, new List<OrtValue> { loss }), "2 outputs", "one output value for two outputs");
            }
            Expect<OntrainException>(() => session.TrainStep(new List<OrtValue> { batch[0] }), "expected 2 user inputs", "one input for two");
            using (var wrongType = OrtValue.CreateTensorValueFromMemory(new double[Rows * Inputs], new long[] { Rows, Inputs }))
                Expect<OntrainException>(() => session.TrainStep(new List<OrtValue> { wrongType, batch[1] }), "input", "a double input where float is expected");
            session.OptimizerStep();
            session.LazyResetGrad();
            string exported = Path.Combine(scratch_, "inference.onnx");
            session.ExportModelForInferencing(exported, new List<string> { "logits" });
            Check(File.Exists(exported) && new FileInfo(exported).Length > 784 * 256 * 4, "the exported model holds the weights");
            Expect<OntrainException>(() => session.ExportModelForInferencing(Path.Combine(scratch_, "none.onnx"), new List<string>()),
                                     "Empty array of graph output names", "export with no outputs");
            Expect<OntrainException>(() => session.ExportModelForInferencing(Path.Combine(scratch_, "bad.onnx"), new List<string> { "nope" }),
                                     "nope", "export of an output that does not exist");
            DisposeAll(batch);
        }
    }

    static void TensorsOfEveryType()
    {
        long[] shape = { 2, 3 };
        using (var f = OrtValue.CreateTensorValueFromMemory(new float[] { 1.5f, -2, 3, 4, 5, 6 }, shape))
        using (var d = OrtValue.CreateTensorValueFromMemory(new double[] { 1e300, 2, 3, 4, 5, -6.25 }, shape))
        using (var i = OrtValue.CreateTensorValueFromMemory(new int[] { int.MinValue, 2, 3, 4, 5, int.MaxValue }, shape))
        using (var l = OrtValue.CreateTensorValueFromMemory(new long[] { long.MinValue, 2, 3, 4, 5, long.MaxValue }, shape))
        using (var b = OrtValue.CreateTensorValueFromMemory(new bool[] { true, false, true, true, false, false }, shape))
        {
            Check(f.GetTensorDataAsArray<float>()[0] == 1.5f && f.GetTensorTypeAndShape().ElementDataType == TensorElementType.Float, "float tensor");
            Check(d.GetTensorDataAsArray<double>()[0] == 1e300 && d.GetTensorDataAsArray<double>()[5] == -6.25, "double tensor");
            Check(i.GetTensorDataAsArray<int>()[0] == int.MinValue && i.GetTensorDataAsArray<int>()[5] == int.MaxValue, "int32 tensor");
            Check(l.GetTensorDataAsArray<long>()[0] == long.MinValue && l.GetTensorTypeAndShape().ElementDataType == TensorElementType.Int64, "int64 tensor");
            var flags = b.GetTensorDataAsArray<bool>();
            Check(flags[0] && !flags[1] && flags[3] && !flags[5] && b.GetTensorTypeAndShape().ElementDataType == TensorElementType.Bool, "bool tensor");
            var info = l.GetTensorTypeAndShape();
            Check(info.Shape.Length == 2 && info.Shape[0] == 2 && info.Shape[1] == 3 && info.ElementCount == 6, "shape and element count");
            Expect<ArgumentException>(() => f.GetTensorDataAsArray<long>(), "Float", "reading float as long");
        }
        Expect<ArgumentException>(() => OrtValue.CreateTensorValueFromMemory(new float[5], new long[] { 2, 3 }), "6 elements", "data shorter than its shape");
        Expect<ArgumentException>(() => OrtValue.CreateTensorValueFromMemory(new short[6], new long[] { 6 }), "Int16", "an unsupported element type");
        var disposed = OrtValue.CreateTensorValueFromMemory(new float[1], new long[] { 1 });
        disposed.Dispose();
        disposed.Dispose();  // twice is harmless
        Expect<ObjectDisposedException>(() => disposed.GetTensorTypeAndShape(), null, "a disposed value");
    }

    static void ProvidersAndOptions()
    {
        using (var state = CheckpointState.LoadCheckpoint(P("checkpoint")))
        {
            using (var options = new SessionOptions())
            {
                options.AppendExecutionProvider_CUDA(0);
                // Whatever this machine has, a session on "cuda" either is made or says why not.
                try
                {
                    using (var s = new TrainingSession(options, state, P("training_model.onnx"), P("eval_model.onnx"), P("optimizer_model.onnx"))) { }
                }
                catch (OntrainException e)
                {
                    Check(e.Message.ToLowerInvariant().Contains("cuda"), "a refused CUDA session says why: " + e.Message);
                }
            }
            using (var options = new SessionOptions())
            {
                Expect<OntrainException>(() => options.AppendExecutionProvider("tpu"), "tpu", "an unknown provider");
                options.SetMemoryLimit(1024);
                Expect<OntrainException>(() => new TrainingSession(options, state, P("training_model.onnx"), P("eval_model.onnx"),
                                                                   P("optimizer_model.onnx")),
                                         "memory limit of 1024", "a session over its memory limit");
                Expect<OntrainException>(() => options.SetMemoryLimit(-1), ">= 0", "a negative memory limit");
            }
            Expect<OntrainException>(() => new TrainingSession(state, P("no_such_model.onnx"), P("optimizer_model.onnx")),
                                     "no_such_model.onnx", "a training model that does not exist");
            using (var noEval = new TrainingSession(state, P("training_model.onnx"), P("optimizer_model.onnx")))
            {
                var batch = Batch(1);
                Expect<OntrainException>(() => noEval.EvalStep(batch), "eval", "EvalStep without an eval model");
                DisposeAll(batch);
            }
        }
    }

    // A session keeps its checkpoint state alive: disposing the state first is safe, and so is leaving
    // both to the finalizers in whatever order they run.
    static void DisposalInEitherOrder()
    {
        var state = CheckpointState.LoadCheckpoint(P("checkpoint"));
        var session = NewSession(state);
        state.Dispose();
        Expect<ObjectDisposedException>(() => state.GetParameter("fc1.bias"), null, "a disposed state");
        var batch = Batch(0);
        using (var outputs = session.TrainStep(batch))
            Check(Bits(outputs[0].GetTensorDataAsArray<float>()[0]) == reference_["train 0"], "a session trains after its state was disposed");
        session.OptimizerStep();
        session.Dispose();
        session.Dispose();
        Expect<ObjectDisposedException>(() => session.OptimizerStep(), null, "a disposed session");
        for (int i = 0; i < 8; ++i)
        {
            var s = CheckpointState.LoadCheckpoint(P("checkpoint"));
            var t = NewSession(s);
            using (var o = t.TrainStep(batch)) { }
            // Neither is disposed: the finalizers release them.
        }
        GC.Collect();
        GC.WaitForPendingFinalizers();
        GC.Collect();
        DisposeAll(batch);
    }

    static int Main(string[] args)
    {
        if (args.Length != 3)
        {
            Console.Error.WriteLine("usage: TrainingTest.exe ARTIFACTS_DIR REFERENCE_FILE SCRATCH_DIR");
            return 2;
        }
        dir_ = args[0];
        scratch_ = args[2];
        foreach (var line in File.ReadAllLines(args[1]))
        {
            int cut = line.LastIndexOf(' ');
            if (cut > 0) reference_[line.Substring(0, cut)] = Convert.ToUInt32(line.Substring(cut + 1), 16);
        }
        TrainingUtils.SetSeed(1);
        var cases = new List<KeyValuePair<string, Action>> {
            new KeyValuePair<string, Action>("LossesMatchTheCppEngine", LossesMatchTheCppEngine),
            new KeyValuePair<string, Action>("LossesMatchTheCppEngineOnADevice", LossesMatchTheCppEngineOnADevice),
            new KeyValuePair<string, Action>("CheckpointsAndProperties", CheckpointsAndProperties),
            new KeyValuePair<string, Action>("ParametersByName", ParametersByName),
            new KeyValuePair<string, Action>("NamesAndBuffers", NamesAndBuffers),
            new KeyValuePair<string, Action>("LearningRateAndScheduler", LearningRateAndScheduler),
            new KeyValuePair<string, Action>("OutputsInPlaceAndEvalExport", OutputsInPlaceAndEvalExport),
            new KeyValuePair<string, Action>("TensorsOfEveryType", TensorsOfEveryType),
            new KeyValuePair<string, Action>("ProvidersAndOptions", ProvidersAndOptions),
            new KeyValuePair<string, Action>("DisposalInEitherOrder", DisposalInEitherOrder),
        };
        var xml = new StringBuilder();
        int failures = 0;
        foreach (var c in cases)
        {
            string error = null;
            try { c.Value(); }
            catch (Exception e) { error = e is CheckFailed ? e.Message : e.ToString(); }
            Console.WriteLine((error == null ? "[  PASSED  ] " : "[  FAILED  ] ") + c.Key + (error == null ? "" : ": " + error));
            xml.AppendFormat("  <testcase name=\"{0}\" classname=\"csharp.TrainingTest\">", c.Key);
            if (error != null)
            {
                ++failures;
                xml.AppendFormat("<failure message=\"{0}\"/>", SecurityElement.Escape(error));
            }
            xml.Append("</testcase>\n");
        }
        string xmlPath = Environment.GetEnvironmentVariable("XML_OUTPUT_FILE");
        if (!string.IsNullOrEmpty(xmlPath))
        {
            File.WriteAllText(xmlPath, string.Format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"csharp\" tests=\"{0}\" failures=\"{1}\">\n{2}</testsuite>\n</testsuites>\n",
                                                     cases.Count, failures, xml));
        }
        Console.WriteLine(failures == 0 ? "C#: all " + cases.Count + " cases passed" : "C#: " + failures + " of " + cases.Count + " cases failed");
        return failures == 0 ? 0 : 1;
    }
}
