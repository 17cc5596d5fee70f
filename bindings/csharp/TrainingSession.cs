// TrainingSession (train, eval and optimizer models over a CheckpointState), SessionOptions and
// TrainingUtils, with ONNX Runtime's C# names and behaviour, over ontrain's C API.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace Ontrain
{
    /// <summary>How a session runs: providers in priority order, threads, memory cap, data parallelism.</summary>
    public sealed class SessionOptions : IDisposable
    {
        private IntPtr handle_;
        private int threads_;

        public SessionOptions() { NativeMethods.Check(NativeMethods.OtCreateSessionOptions(out handle_)); }

        internal IntPtr Handle
        {
            get
            {
                if (handle_ == IntPtr.Zero) throw new ObjectDisposedException("SessionOptions");
                return handle_;
            }
        }

        /// <summary>Threads per provider; 0 (the default) is one per core.</summary>
        public int IntraOpNumThreads
        {
            get { return threads_; }
            set
            {
                NativeMethods.Check(NativeMethods.OtSessionOptionsSetIntraOpThreads(Handle, value));
                threads_ = value;
            }
        }

        /// <summary>Adds a provider by name: "cpu", "sim" or "cuda" / "cuda:N". The CPU is always last.</summary>
        public void AppendExecutionProvider(string name)
        {
            if (name == null) throw new ArgumentNullException("name");
            NativeMethods.Check(NativeMethods.OtSessionOptionsAppendProvider(Handle, NativeMethods.Utf8(name)));
        }

        public void AppendExecutionProvider_CPU(int useArena = 1) { AppendExecutionProvider("cpu"); }

        public void AppendExecutionProvider_CUDA(int deviceId = 0) { AppendExecutionProvider("cuda:" + deviceId); }

        /// <summary>Caps the memory a session plans, in bytes (0: no cap).</summary>
        public void SetMemoryLimit(long bytes)
        {
            NativeMethods.Check(NativeMethods.OtSessionOptionsSetMemoryLimit(Handle, bytes));
        }

        /// <summary>"mpi", "nccl" or "" (train alone); see the C API.</summary>
        public void SetDataParallel(string backend)
        {
            NativeMethods.Check(NativeMethods.OtSessionOptionsSetDataParallel(Handle, NativeMethods.Utf8(backend ?? "")));
        }

        public void Dispose()
        {
            Release();
            GC.SuppressFinalize(this);
        }

        ~SessionOptions() { Release(); }

        private void Release()
        {
            if (handle_ != IntPtr.Zero)
            {
                NativeMethods.OtReleaseSessionOptions(handle_);
                handle_ = IntPtr.Zero;
            }
        }
    }

    public static class TrainingUtils
    {
        /// <summary>Seeds the engine's random numbers (dropout, generated initial weights).</summary>
        public static void SetSeed(long seed) { NativeMethods.Check(NativeMethods.OtSetSeed(seed)); }
    }

    /// <summary>
    /// A training session: TrainStep (forward and backward, gradients accumulated), OptimizerStep,
    /// LazyResetGrad, EvalStep, the learning rate and its linear scheduler, parameter buffers and export.
    /// One thread at a time per session; separate sessions may run in separate threads.
    /// </summary>
    public sealed class TrainingSession : IDisposable
    {
        private enum Scheduler { None, Constant, Linear }

        private IntPtr handle_;
        private readonly CheckpointState state_;
        private Scheduler scheduler_ = Scheduler.None;

        public TrainingSession(CheckpointState state, string trainModelPath, string optimizerModelPath)
            : this(null, state, trainModelPath, null, optimizerModelPath) { }

        public TrainingSession(CheckpointState state, string trainModelPath, string evalModelPath, string optimizerModelPath)
            : this(null, state, trainModelPath, evalModelPath, optimizerModelPath) { }

        public TrainingSession(SessionOptions options, CheckpointState state, string trainModelPath, string evalModelPath,
                               string optimizerModelPath)
        {
            if (state == null) throw new ArgumentNullException("state");
            if (trainModelPath == null) throw new ArgumentNullException("trainModelPath");
            IntPtr session;
            NativeMethods.Check(NativeMethods.OtCreateTrainingSession(
                NativeMethods.Env, options == null ? IntPtr.Zero : options.Handle, state.Handle,
                NativeMethods.Utf8(trainModelPath), NativeMethods.Utf8(evalModelPath),
                NativeMethods.Utf8(optimizerModelPath), out session));
            handle_ = session;
            state_ = state;
            state_.SessionStarted();
        }

        private IntPtr Handle
        {
            get
            {
                if (handle_ == IntPtr.Zero) throw new ObjectDisposedException("TrainingSession");
                return handle_;
            }
        }

        /// <summary>Runs the training model on `inputValues` (in InputNames(true) order); returns its outputs
        /// (the loss first), which the caller disposes.</summary>
        public IDisposableReadOnlyCollection<OrtValue> TrainStep(IReadOnlyCollection<OrtValue> inputValues)
        {
            return Step(true, inputValues);
        }

        /// <summary>Runs the training model and writes its outputs into `outputValues` in place (each of the
        /// output's type and shape).</summary>
        public void TrainStep(IReadOnlyCollection<OrtValue> inputValues, IReadOnlyCollection<OrtValue> outputValues)
        {
            StepInto(true, inputValues, outputValues);
        }

        public IDisposableReadOnlyCollection<OrtValue> EvalStep(IReadOnlyCollection<OrtValue> inputValues)
        {
            return Step(false, inputValues);
        }

        public void EvalStep(IReadOnlyCollection<OrtValue> inputValues, IReadOnlyCollection<OrtValue> outputValues)
        {
            StepInto(false, inputValues, outputValues);
        }

        /// <summary>The next TrainStep overwrites the gradients instead of adding to them.</summary>
        public void LazyResetGrad() { NativeMethods.Check(NativeMethods.OtLazyResetGrad(Handle)); }

        public void OptimizerStep() { NativeMethods.Check(NativeMethods.OtOptimizerStep(Handle, IntPtr.Zero)); }

        /// <summary>Sets a constant learning rate; not allowed once a scheduler is registered.</summary>
        public void SetLearningRate(float learningRate)
        {
            if (scheduler_ == Scheduler.Linear)
            {
                throw new InvalidOperationException("Cannot set a constant learning rate while a learning rate scheduler is registered.");
            }
            NativeMethods.Check(NativeMethods.OtSetLearningRate(Handle, learningRate));
            scheduler_ = Scheduler.Constant;
        }

        public float GetLearningRate()
        {
            float lr;
            NativeMethods.Check(NativeMethods.OtGetLearningRate(Handle, out lr));
            return lr;
        }

        /// <summary>ONNX Runtime's linear schedule: rises from 0 to `initialLearningRate` over the warm-up
        /// steps, then falls to 0 at `totalStepCount`.</summary>
        public void RegisterLinearLRScheduler(long warmupStepCount, long totalStepCount, float initialLearningRate)
        {
            NativeMethods.Check(NativeMethods.OtRegisterLinearLRScheduler(Handle, warmupStepCount, totalStepCount, initialLearningRate));
            scheduler_ = Scheduler.Linear;
        }

        public void SchedulerStep()
        {
            if (scheduler_ != Scheduler.Linear)
            {
                throw new InvalidOperationException("Cannot take a scheduler step without a registered learning rate scheduler.");
            }
            NativeMethods.Check(NativeMethods.OtSchedulerStep(Handle));
        }

        /// <summary>Writes an inference model: the eval model pruned to `graphOutputNames`, with the current
        /// parameters embedded.</summary>
        public void ExportModelForInferencing(string inferenceModelPath, IReadOnlyCollection<string> graphOutputNames)
        {
            if (inferenceModelPath == null) throw new ArgumentNullException("inferenceModelPath");
            if (graphOutputNames == null) throw new ArgumentNullException("graphOutputNames");
            var names = new IntPtr[graphOutputNames.Count];
            try
            {
                int i = 0;
                foreach (var name in graphOutputNames)
                {
                    byte[] bytes = NativeMethods.Utf8(name ?? "");
                    names[i] = Marshal.AllocHGlobal(bytes.Length);
                    Marshal.Copy(bytes, 0, names[i], bytes.Length);
                    ++i;
                }
                NativeMethods.Check(NativeMethods.OtExportModelForInferencing(Handle, NativeMethods.Utf8(inferenceModelPath),
                                                                              (UIntPtr)names.Length, names));
            }
            finally
            {
                foreach (var p in names) if (p != IntPtr.Zero) Marshal.FreeHGlobal(p);
            }
        }

        /// <summary>The parameters (trainable ones only, or all) as one flat float tensor, in the training
        /// model's input order.</summary>
        public OrtValue ToBuffer(bool onlyTrainable)
        {
            UIntPtr size;
            NativeMethods.Check(NativeMethods.OtGetParametersSize(Handle, out size, onlyTrainable));
            var buffer = OrtValue.CreateAllocatedTensorValue(TensorElementType.Float, new long[] { (long)size });
            try
            {
                NativeMethods.Check(NativeMethods.OtCopyParametersToBuffer(Handle, buffer.Handle, onlyTrainable));
            }
            catch
            {
                buffer.Dispose();
                throw;
            }
            return buffer;
        }

        /// <summary>Loads parameters from a flat float tensor made by ToBuffer: its length says whether it
        /// holds the trainable parameters only or all of them.</summary>
        public void FromBuffer(OrtValue buffer)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            var info = buffer.GetTensorTypeAndShape();
            if (info.Shape.Length != 1) throw new ArgumentException("the buffer must be a 1-D tensor");
            UIntPtr trainable, all;
            NativeMethods.Check(NativeMethods.OtGetParametersSize(Handle, out trainable, true));
            NativeMethods.Check(NativeMethods.OtGetParametersSize(Handle, out all, false));
            bool onlyTrainable;
            if (info.Shape[0] == (long)trainable) onlyTrainable = true;
            else if (info.Shape[0] == (long)all) onlyTrainable = false;
            else
            {
                throw new ArgumentException("the buffer holds " + info.Shape[0] + " elements; the trainable parameters have " +
                                            trainable + " and all parameters " + all);
            }
            NativeMethods.Check(NativeMethods.OtCopyBufferToParameters(Handle, buffer.Handle, onlyTrainable));
        }

        /// <summary>The user inputs of the training model (training: true) or of the eval model.</summary>
        public List<string> InputNames(bool training)
        {
            UIntPtr count;
            NativeMethods.Check(training ? NativeMethods.OtTrainingSessionGetTrainingModelInputCount(Handle, out count)
                                         : NativeMethods.OtTrainingSessionGetEvalModelInputCount(Handle, out count));
            var names = new List<string>();
            for (ulong i = 0; i < (ulong)count; ++i)
            {
                IntPtr name;
                NativeMethods.Check(training ? NativeMethods.OtTrainingSessionGetTrainingModelInputName(Handle, (UIntPtr)i, IntPtr.Zero, out name)
                                             : NativeMethods.OtTrainingSessionGetEvalModelInputName(Handle, (UIntPtr)i, IntPtr.Zero, out name));
                names.Add(NativeMethods.TakeString(name));
            }
            return names;
        }

        public List<string> OutputNames(bool training)
        {
            var names = new List<string>();
            int n = OutputCount(training);
            for (int i = 0; i < n; ++i)
            {
                IntPtr name;
                NativeMethods.Check(training ? NativeMethods.OtTrainingSessionGetTrainingModelOutputName(Handle, (UIntPtr)i, IntPtr.Zero, out name)
                                             : NativeMethods.OtTrainingSessionGetEvalModelOutputName(Handle, (UIntPtr)i, IntPtr.Zero, out name));
                names.Add(NativeMethods.TakeString(name));
            }
            return names;
        }

        private int OutputCount(bool training)
        {
            UIntPtr count;
            NativeMethods.Check(training ? NativeMethods.OtTrainingSessionGetTrainingModelOutputCount(Handle, out count)
                                         : NativeMethods.OtTrainingSessionGetEvalModelOutputCount(Handle, out count));
            return (int)count;
        }

        private static IntPtr[] Handles(IReadOnlyCollection<OrtValue> values, string what)
        {
            if (values == null) throw new ArgumentNullException(what);
            var handles = new IntPtr[values.Count];
            int i = 0;
            foreach (var v in values)
            {
                if (v == null) throw new ArgumentNullException(what + "[" + i + "]");
                handles[i++] = v.Handle;
            }
            return handles;
        }

        private IDisposableReadOnlyCollection<OrtValue> Step(bool training, IReadOnlyCollection<OrtValue> inputValues)
        {
            IntPtr[] inputs = Handles(inputValues, "inputValues");
            var outputs = new IntPtr[OutputCount(training)];
            IntPtr status = training
                ? NativeMethods.OtTrainStep(Handle, IntPtr.Zero, (UIntPtr)inputs.Length, inputs, (UIntPtr)outputs.Length, outputs)
                : NativeMethods.OtEvalStep(Handle, IntPtr.Zero, (UIntPtr)inputs.Length, inputs, (UIntPtr)outputs.Length, outputs);
            var result = new DisposableList<OrtValue>(outputs.Length);
            foreach (var o in outputs) if (o != IntPtr.Zero) result.Add(new OrtValue(o));
            if (status != IntPtr.Zero)
            {
                result.Dispose();
                NativeMethods.Check(status);
            }
            GC.KeepAlive(inputValues);
            return result;
        }

        private void StepInto(bool training, IReadOnlyCollection<OrtValue> inputValues, IReadOnlyCollection<OrtValue> outputValues)
        {
            IntPtr[] inputs = Handles(inputValues, "inputValues");
            IntPtr[] outputs = Handles(outputValues, "outputValues");
            int expected = OutputCount(training);
            if (outputs.Length != expected)
            {
                throw new ArgumentException("outputValues has " + outputs.Length + " values; the " + (training ? "training" : "eval") +
                                            " model has " + expected + " outputs");
            }
            NativeMethods.Check(training
                ? NativeMethods.OtTrainStep(Handle, IntPtr.Zero, (UIntPtr)inputs.Length, inputs, (UIntPtr)outputs.Length, outputs)
                : NativeMethods.OtEvalStep(Handle, IntPtr.Zero, (UIntPtr)inputs.Length, inputs, (UIntPtr)outputs.Length, outputs));
            GC.KeepAlive(inputValues);
            GC.KeepAlive(outputValues);
        }

        public void Dispose()
        {
            Release();
            GC.SuppressFinalize(this);
        }

        ~TrainingSession() { Release(); }

        private void Release()
        {
            if (handle_ != IntPtr.Zero)
            {
                NativeMethods.OtReleaseTrainingSession(handle_);
                handle_ = IntPtr.Zero;
                state_.SessionEnded();
            }
        }
    }
}
