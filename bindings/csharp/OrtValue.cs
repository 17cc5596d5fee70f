// Tensors for the binding's inputs and outputs: OrtValue (a host tensor owned by the engine, made from an
// array and a shape, read back as an array), its element types and its type-and-shape description, with
// ONNX Runtime's C# names.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace Ontrain
{
    /// <summary>Element types: ONNX's TensorProto.DataType codes (those the binding converts arrays for).</summary>
    public enum TensorElementType
    {
        Float = 1,
        Int32 = 6,
        Int64 = 7,
        Bool = 9,
        Double = 11,
    }

    /// <summary>A tensor's element type and shape.</summary>
    public sealed class OrtTensorTypeAndShapeInfo
    {
        public TensorElementType ElementDataType { get; private set; }
        public long[] Shape { get; private set; }
        public long ElementCount { get; private set; }

        internal OrtTensorTypeAndShapeInfo(IntPtr info)
        {
            try
            {
                ElementDataType = (TensorElementType)NativeMethods.OtGetTensorElementType(info);
                var rank = NativeMethods.OtGetDimensionsCount(info);
                Shape = new long[(int)rank];
                NativeMethods.OtGetDimensions(info, Shape, rank);
                long n = 1;
                foreach (long d in Shape) n *= d;
                ElementCount = n;
            }
            finally
            {
                NativeMethods.OtReleaseTensorTypeAndShapeInfo(info);
            }
        }
    }

    /// <summary>
    /// A host tensor held by the engine. Made from an array (copied) and a shape; read with
    /// GetTensorDataAsArray. Dispose it (or let a using block do it) to free its memory at once.
    /// </summary>
    public sealed class OrtValue : IDisposable
    {
        private IntPtr handle_;

        internal OrtValue(IntPtr handle) { handle_ = handle; }

        internal IntPtr Handle
        {
            get
            {
                if (handle_ == IntPtr.Zero) throw new ObjectDisposedException("OrtValue");
                return handle_;
            }
        }

        /// <summary>A tensor holding a copy of `data` (float, double, int, long or bool) with `shape`.</summary>
        public static OrtValue CreateTensorValueFromMemory<T>(T[] data, long[] shape)
        {
            if (data == null) throw new ArgumentNullException("data");
            if (shape == null) throw new ArgumentNullException("shape");
            TensorElementType type = ElementTypeOf(typeof(T));
            long count = 1;
            foreach (long d in shape)
            {
                if (d < 0) throw new ArgumentException("shape has a negative dimension: " + d);
                count *= d;
            }
            if (count != data.Length)
            {
                throw new ArgumentException("shape [" + string.Join(", ", shape) + "] holds " + count +
                                            " elements but data has " + data.Length);
            }
            // bool has no fixed managed layout for pinning; the engine's bool is one byte.
            object pinned = data;
            if (type == TensorElementType.Bool)
            {
                var bytes = new byte[data.Length];
                var flags = (bool[])(object)data;
                for (int i = 0; i < bytes.Length; ++i) bytes[i] = flags[i] ? (byte)1 : (byte)0;
                pinned = bytes;
            }
            GCHandle pin = GCHandle.Alloc(pinned, GCHandleType.Pinned);
            try
            {
                IntPtr value;
                NativeMethods.Check(NativeMethods.OtCreateTensor((int)type, shape, (UIntPtr)shape.Length,
                                                                 pin.AddrOfPinnedObject(), out value));
                return new OrtValue(value);
            }
            finally
            {
                pin.Free();
            }
        }

        /// <summary>A zero-filled tensor of `type` and `shape` (for outputs filled in place, or buffers).</summary>
        public static OrtValue CreateAllocatedTensorValue(TensorElementType type, long[] shape)
        {
            if (shape == null) throw new ArgumentNullException("shape");
            IntPtr value;
            NativeMethods.Check(NativeMethods.OtCreateTensor((int)type, shape, (UIntPtr)shape.Length, IntPtr.Zero, out value));
            return new OrtValue(value);
        }

        public OrtTensorTypeAndShapeInfo GetTensorTypeAndShape()
        {
            IntPtr info;
            NativeMethods.Check(NativeMethods.OtGetTensorTypeAndShape(Handle, out info));
            return new OrtTensorTypeAndShapeInfo(info);
        }

        /// <summary>A copy of the elements; T must match the tensor's element type.</summary>
        public T[] GetTensorDataAsArray<T>()
        {
            var info = GetTensorTypeAndShape();
            TensorElementType want = ElementTypeOf(typeof(T));
            if (info.ElementDataType != want)
            {
                throw new ArgumentException("the tensor holds " + info.ElementDataType + ", not " + want);
            }
            IntPtr data;
            NativeMethods.Check(NativeMethods.OtTensorMutableData(Handle, out data));
            int n = checked((int)info.ElementCount);
            object result;
            switch (want)
            {
                case TensorElementType.Float: { var a = new float[n]; if (n > 0) Marshal.Copy(data, a, 0, n); result = a; break; }
                case TensorElementType.Double: { var a = new double[n]; if (n > 0) Marshal.Copy(data, a, 0, n); result = a; break; }
                case TensorElementType.Int32: { var a = new int[n]; if (n > 0) Marshal.Copy(data, a, 0, n); result = a; break; }
                case TensorElementType.Int64: { var a = new long[n]; if (n > 0) Marshal.Copy(data, a, 0, n); result = a; break; }
                default:
                {
                    var bytes = new byte[n];
                    if (n > 0) Marshal.Copy(data, bytes, 0, n);
                    var a = new bool[n];
                    for (int i = 0; i < n; ++i) a[i] = bytes[i] != 0;
                    result = a;
                    break;
                }
            }
            return (T[])result;
        }

        internal static TensorElementType ElementTypeOf(Type t)
        {
            if (t == typeof(float)) return TensorElementType.Float;
            if (t == typeof(double)) return TensorElementType.Double;
            if (t == typeof(int)) return TensorElementType.Int32;
            if (t == typeof(long)) return TensorElementType.Int64;
            if (t == typeof(bool)) return TensorElementType.Bool;
            throw new ArgumentException("unsupported element type " + t.Name + " (float, double, int, long and bool are)");
        }

        public void Dispose()
        {
            Release();
            GC.SuppressFinalize(this);
        }

        ~OrtValue() { Release(); }

        private void Release()
        {
            if (handle_ != IntPtr.Zero)
            {
                NativeMethods.OtReleaseValue(handle_);
                handle_ = IntPtr.Zero;
            }
        }
    }

    /// <summary>A read-only collection that disposes its elements with itself (step outputs).</summary>
    public interface IDisposableReadOnlyCollection<T> : IReadOnlyList<T>, IDisposable
    {
    }

    internal sealed class DisposableList<T> : List<T>, IDisposableReadOnlyCollection<T> where T : IDisposable
    {
        public DisposableList(int capacity) : base(capacity) { }

        public void Dispose()
        {
            foreach (var item in this)
            {
                if (item != null) item.Dispose();
            }
            Clear();
        }
    }
}
