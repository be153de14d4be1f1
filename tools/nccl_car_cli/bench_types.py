"""The element types and reduction ops bench measures. A type is kept, printed and passed to
all_reduce_perf -d under nccl-tests' name; car_nccl_bench --type gets the library's name
(kernels/all_reduce.h); --dtypes accepts either and a few other spellings. The ops are
NCCL's built-in ones, under the names nccl-tests (-o), car_nccl_bench (--op) and the library
share."""

# nccl-tests' name, the library's name, other spellings; in NCCL's order.
_TYPES = (
    ("int8", "int8", ()),
    ("uint8", "uint8", ()),
    ("int32", "int32", ()),
    ("uint32", "uint32", ()),
    ("int64", "int64", ()),
    ("uint64", "uint64", ()),
    ("half", "fp16", ("float16",)),
    ("float", "fp32", ("float32",)),
    ("double", "fp64", ("float64",)),
    ("bfloat16", "bf16", ()),
    ("f8e4m3", "fp8e4m3", ()),
    ("f8e5m2", "fp8e5m2", ()),
)
DTYPES = tuple(name for name, _library, _others in _TYPES)
LIBRARY_NAMES = {name: library for name, library, _others in _TYPES}
# Every spelling --dtypes accepts -> nccl-tests' name.
SPELLINGS = {spelling: name for name, library, others in _TYPES for spelling in (name, library, *others)}

OPS = ("sum", "prod", "min", "max", "avg")
DEFAULT_OP = "sum"
