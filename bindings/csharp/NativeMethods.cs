// The C API of engine/include/ontrain/c_api.h as P/Invoke declarations, and the helpers every class of the
// binding shares: engine errors become OntrainException, strings cross as NUL-terminated UTF-8.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Ontrain
{
    /// <summary>An error reported by the engine: its message, and ontrain's status code (non-zero).</summary>
    public class OntrainException : Exception
    {
        public int Code { get; private set; }
        public OntrainException(int code, string message) : base(message) { Code = code; }
    }

    internal static class NativeMethods
    {
        // libontrain.so is found beside the program's assembly or on LD_LIBRARY_PATH.
        private const string Lib = "libontrain.so";

        [DllImport(Lib)] public static extern IntPtr OtStatusMessage(IntPtr status);
        [DllImport(Lib)] public static extern int OtStatusCode(IntPtr status);
        [DllImport(Lib)] public static extern void OtReleaseStatus(IntPtr status);
        [DllImport(Lib)] public static extern void OtFree(IntPtr p);

        [DllImport(Lib)] public static extern IntPtr OtCreateEnv(out IntPtr env);
        [DllImport(Lib)] public static extern IntPtr OtCreateSessionOptions(out IntPtr options);
        [DllImport(Lib)] public static extern IntPtr OtSessionOptionsSetIntraOpThreads(IntPtr options, int threads);
        [DllImport(Lib)] public static extern IntPtr OtSessionOptionsAppendProvider(IntPtr options, byte[] provider);
        [DllImport(Lib)] public static extern IntPtr OtSessionOptionsSetDataParallel(IntPtr options, byte[] backend);
        [DllImport(Lib)] public static extern IntPtr OtSessionOptionsSetMemoryLimit(IntPtr options, long bytes);
        [DllImport(Lib)] public static extern void OtReleaseSessionOptions(IntPtr options);

        [DllImport(Lib)] public static extern IntPtr OtCreateTensor(int type, long[] shape, UIntPtr rank, IntPtr data, out IntPtr value);
        [DllImport(Lib)] public static extern IntPtr OtTensorMutableData(IntPtr value, out IntPtr data);
        [DllImport(Lib)] public static extern IntPtr OtGetTensorTypeAndShape(IntPtr value, out IntPtr info);
        [DllImport(Lib)] public static extern int OtGetTensorElementType(IntPtr info);
        [DllImport(Lib)] public static extern UIntPtr OtGetDimensionsCount(IntPtr info);
        [DllImport(Lib)] public static extern void OtGetDimensions(IntPtr info, long[] dims, UIntPtr length);
        [DllImport(Lib)] public static extern void OtReleaseTensorTypeAndShapeInfo(IntPtr info);
        [DllImport(Lib)] public static extern void OtReleaseValue(IntPtr value);

        [DllImport(Lib)] public static extern IntPtr OtLoadCheckpoint(byte[] path, out IntPtr state);
        [DllImport(Lib)] public static extern IntPtr OtLoadCheckpointFromBuffer(byte[] buffer, UIntPtr length, out IntPtr state);
        [DllImport(Lib)] public static extern IntPtr OtSaveCheckpoint(IntPtr state, byte[] path, [MarshalAs(UnmanagedType.I1)] bool includeOptimizerState);
        [DllImport(Lib)] public static extern IntPtr OtAddProperty(IntPtr state, byte[] name, int type, IntPtr value);
        [DllImport(Lib)] public static extern IntPtr OtGetProperty(IntPtr state, byte[] name, IntPtr allocator, out int type, out IntPtr value);
        [DllImport(Lib)] public static extern IntPtr OtGetParameterTypeAndShape(IntPtr state, byte[] name, out IntPtr info);
        [DllImport(Lib)] public static extern IntPtr OtUpdateParameter(IntPtr state, byte[] name, IntPtr value);
        [DllImport(Lib)] public static extern IntPtr OtGetParameter(IntPtr state, byte[] name, IntPtr allocator, out IntPtr value);
        [DllImport(Lib)] public static extern void OtReleaseCheckpointState(IntPtr state);

        [DllImport(Lib)] public static extern IntPtr OtCreateTrainingSession(IntPtr env, IntPtr options, IntPtr state, byte[] trainPath, byte[] evalPath, byte[] optimizerPath, out IntPtr session);
        [DllImport(Lib)] public static extern IntPtr OtTrainingSessionGetTrainingModelInputCount(IntPtr session, out UIntPtr count);
        [DllImport(Lib)] public static extern IntPtr OtTrainingSessionGetEvalModelInputCount(IntPtr session, out UIntPtr count);
        [DllImport(Lib)] public static extern IntPtr OtTrainingSessionGetTrainingModelOutputCount(IntPtr session, out UIntPtr count);
        [DllImport(Lib)] public static extern IntPtr OtTrainingSessionGetEvalModelOutputCount(IntPtr session, out UIntPtr count);
        [DllImport(Lib)] public static extern IntPtr OtTrainingSessionGetTrainingModelInputName(IntPtr session, UIntPtr index, IntPtr allocator, out IntPtr name);
        [DllImport(Lib)] public static extern IntPtr OtTrainingSessionGetEvalModelInputName(IntPtr session, UIntPtr index, IntPtr allocator, out IntPtr name);
        [DllImport(Lib)] public static extern IntPtr OtTrainingSessionGetTrainingModelOutputName(IntPtr session, UIntPtr index, IntPtr allocator, out IntPtr name);
        [DllImport(Lib)] public static extern IntPtr OtTrainingSessionGetEvalModelOutputName(IntPtr session, UIntPtr index, IntPtr allocator, out IntPtr name);
        [DllImport(Lib)] public static extern IntPtr OtTrainStep(IntPtr session, IntPtr runOptions, UIntPtr inputsLength, IntPtr[] inputs, UIntPtr outputsLength, IntPtr[] outputs);
        [DllImport(Lib)] public static extern IntPtr OtEvalStep(IntPtr session, IntPtr runOptions, UIntPtr inputsLength, IntPtr[] inputs, UIntPtr outputsLength, IntPtr[] outputs);
        [DllImport(Lib)] public static extern IntPtr OtLazyResetGrad(IntPtr session);
        [DllImport(Lib)] public static extern IntPtr OtSetLearningRate(IntPtr session, float learningRate);
        [DllImport(Lib)] public static extern IntPtr OtGetLearningRate(IntPtr session, out float learningRate);
        [DllImport(Lib)] public static extern IntPtr OtOptimizerStep(IntPtr session, IntPtr runOptions);
        [DllImport(Lib)] public static extern IntPtr OtRegisterLinearLRScheduler(IntPtr session, long warmupStepCount, long totalStepCount, float initialLearningRate);
        [DllImport(Lib)] public static extern IntPtr OtSchedulerStep(IntPtr session);
        [DllImport(Lib)] public static extern IntPtr OtGetParametersSize(IntPtr session, out UIntPtr size, [MarshalAs(UnmanagedType.I1)] bool trainableOnly);
        [DllImport(Lib)] public static extern IntPtr OtCopyParametersToBuffer(IntPtr session, IntPtr buffer, [MarshalAs(UnmanagedType.I1)] bool trainableOnly);
        [DllImport(Lib)] public static extern IntPtr OtCopyBufferToParameters(IntPtr session, IntPtr buffer, [MarshalAs(UnmanagedType.I1)] bool trainableOnly);
        [DllImport(Lib)] public static extern IntPtr OtExportModelForInferencing(IntPtr session, byte[] path, UIntPtr outputsLength, IntPtr[] outputNames);
        [DllImport(Lib)] public static extern void OtReleaseTrainingSession(IntPtr session);
        [DllImport(Lib)] public static extern IntPtr OtSetSeed(long seed);

        /// <summary>Throws the engine's error when `status` is one (and releases it).</summary>
        public static void Check(IntPtr status)
        {
            if (status == IntPtr.Zero) return;
            int code = OtStatusCode(status);
            string message = FromUtf8(OtStatusMessage(status));
            OtReleaseStatus(status);
            throw new OntrainException(code, message);
        }

        /// <summary>NUL-terminated UTF-8 bytes of `s`; null stays null (the C API's NULL).</summary>
        public static byte[] Utf8(string s)
        {
            if (s == null) return null;
            byte[] body = Encoding.UTF8.GetBytes(s);
            byte[] z = new byte[body.Length + 1];
            Buffer.BlockCopy(body, 0, z, 0, body.Length);
            return z;
        }

        public static string FromUtf8(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) ++n;
            byte[] bytes = new byte[n];
            Marshal.Copy(p, bytes, 0, n);
            return Encoding.UTF8.GetString(bytes);
        }

        /// <summary>A string the API allocated with the NULL allocator, freed after reading.</summary>
        public static string TakeString(IntPtr p)
        {
            try { return FromUtf8(p); } finally { OtFree(p); }
        }

        // The C API's environment carries no state; one serves the whole process, as OrtEnv does.
        private static IntPtr env_ = IntPtr.Zero;
        private static readonly object envLock_ = new object();
        public static IntPtr Env
        {
            get
            {
                lock (envLock_)
                {
                    if (env_ == IntPtr.Zero) Check(OtCreateEnv(out env_));
                    return env_;
                }
            }
        }
    }
}
