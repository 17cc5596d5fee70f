// CheckpointState: a checkpoint's parameters, optimizer state and properties (ONNX Runtime's C# class of
// the same name). A state lives as long as any TrainingSession made from it: disposing it first, or its
// finalizer running first, only marks it, and the last session to end releases it.
using System;
using System.Runtime.InteropServices;

namespace Ontrain
{
    public sealed class CheckpointState : IDisposable
    {
        private IntPtr handle_;
        private int sessions_;       // live TrainingSessions made from this state
        private bool released_;      // Dispose or the finalizer has run
        private readonly object lock_ = new object();

        private CheckpointState(IntPtr handle) { handle_ = handle; }

        internal IntPtr Handle
        {
            get
            {
                lock (lock_)
                {
                    if (released_ || handle_ == IntPtr.Zero) throw new ObjectDisposedException("CheckpointState");
                    return handle_;
                }
            }
        }

        /// <summary>Loads a checkpoint file (ONNX Runtime's format, versions 1 and 2).</summary>
        public static CheckpointState LoadCheckpoint(string checkpointPath)
        {
            if (checkpointPath == null) throw new ArgumentNullException("checkpointPath");
            IntPtr state;
            NativeMethods.Check(NativeMethods.OtLoadCheckpoint(NativeMethods.Utf8(checkpointPath), out state));
            return new CheckpointState(state);
        }

        /// <summary>Loads a checkpoint from its bytes.</summary>
        public static CheckpointState LoadCheckpointFromBuffer(byte[] buffer)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            IntPtr state;
            NativeMethods.Check(NativeMethods.OtLoadCheckpointFromBuffer(buffer, (UIntPtr)buffer.Length, out state));
            return new CheckpointState(state);
        }

        /// <summary>Saves `state` to `checkpointPath` atomically (the previous file survives a failed save).</summary>
        public static void SaveCheckpoint(CheckpointState state, string checkpointPath, bool includeOptimizerState = false)
        {
            if (state == null) throw new ArgumentNullException("state");
            if (checkpointPath == null) throw new ArgumentNullException("checkpointPath");
            NativeMethods.Check(NativeMethods.OtSaveCheckpoint(state.Handle, NativeMethods.Utf8(checkpointPath), includeOptimizerState));
        }

        public void AddProperty(string propertyName, long propertyValue)
        {
            var box = Marshal.AllocHGlobal(8);
            try
            {
                Marshal.WriteInt64(box, propertyValue);
                NativeMethods.Check(NativeMethods.OtAddProperty(Handle, NativeMethods.Utf8(propertyName), 0, box));
            }
            finally { Marshal.FreeHGlobal(box); }
        }

        public void AddProperty(string propertyName, float propertyValue)
        {
            var box = Marshal.AllocHGlobal(4);
            try
            {
                Marshal.Copy(new[] { propertyValue }, 0, box, 1);
                NativeMethods.Check(NativeMethods.OtAddProperty(Handle, NativeMethods.Utf8(propertyName), 1, box));
            }
            finally { Marshal.FreeHGlobal(box); }
        }

        public void AddProperty(string propertyName, string propertyValue)
        {
            if (propertyValue == null) throw new ArgumentNullException("propertyValue");
            var pin = GCHandle.Alloc(NativeMethods.Utf8(propertyValue), GCHandleType.Pinned);
            try
            {
                NativeMethods.Check(NativeMethods.OtAddProperty(Handle, NativeMethods.Utf8(propertyName), 2, pin.AddrOfPinnedObject()));
            }
            finally { pin.Free(); }
        }

        /// <summary>A property's value: a long, a float or a string. A missing name is an OntrainException.</summary>
        public object GetProperty(string propertyName)
        {
            int type;
            IntPtr value;
            NativeMethods.Check(NativeMethods.OtGetProperty(Handle, NativeMethods.Utf8(propertyName), IntPtr.Zero, out type, out value));
            try
            {
                switch (type)
                {
                    case 0: return Marshal.ReadInt64(value);
                    case 1: { var f = new float[1]; Marshal.Copy(value, f, 0, 1); return f[0]; }
                    default: return NativeMethods.FromUtf8(value);
                }
            }
            finally { NativeMethods.OtFree(value); }
        }

        /// <summary>Replaces a parameter's values (same type and shape).</summary>
        public void UpdateParameter(string parameterName, OrtValue parameter)
        {
            if (parameter == null) throw new ArgumentNullException("parameter");
            NativeMethods.Check(NativeMethods.OtUpdateParameter(Handle, NativeMethods.Utf8(parameterName), parameter.Handle));
        }

        /// <summary>A copy of a parameter's values.</summary>
        public OrtValue GetParameter(string parameterName)
        {
            IntPtr value;
            NativeMethods.Check(NativeMethods.OtGetParameter(Handle, NativeMethods.Utf8(parameterName), IntPtr.Zero, out value));
            return new OrtValue(value);
        }

        public OrtTensorTypeAndShapeInfo GetParameterTypeAndShape(string parameterName)
        {
            IntPtr info;
            NativeMethods.Check(NativeMethods.OtGetParameterTypeAndShape(Handle, NativeMethods.Utf8(parameterName), out info));
            return new OrtTensorTypeAndShapeInfo(info);
        }

        internal void SessionStarted()
        {
            lock (lock_) { ++sessions_; }
        }

        internal void SessionEnded()
        {
            lock (lock_)
            {
                --sessions_;
                if (released_ && sessions_ == 0) Free();
            }
        }

        public void Dispose()
        {
            Release();
            GC.SuppressFinalize(this);
        }

        ~CheckpointState() { Release(); }

        private void Release()
        {
            lock (lock_)
            {
                released_ = true;
                if (sessions_ == 0) Free();
            }
        }

        private void Free()
        {
            if (handle_ != IntPtr.Zero)
            {
                NativeMethods.OtReleaseCheckpointState(handle_);
                handle_ = IntPtr.Zero;
            }
        }
    }
}
