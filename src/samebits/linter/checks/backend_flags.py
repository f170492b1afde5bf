"""The names of each ``torch.backends`` module, so unknown-backend-flag (SB102) needs no torch
import. Checked against the installed torch by tests/test_lint_backend_flags.py, which names any flag
a newer torch added (add it here; keep the old ones, other users run older torch)."""

from __future__ import annotations

TORCH = "2.13.0"  # the newest torch the table was taken from
FLAGS: dict[str, frozenset[str]] = {
    "cpu": frozenset(["get_cpu_capability", "torch"]),
    "cuda": frozenset(
        [
            "Any",
            "SDPAParams",
            "SDPBackend",
            "_BlasBackends",
            "_BlasBackends_str",
            "_LinalgBackends",
            "_LinalgBackends_str",
            "_ROCmFABackends",
            "_ROCmFABackends_str",
            "allow_fp16_bf16_reduction_math_sdp",
            "blas_workspace_size",
            "can_use_cudnn_attention",
            "can_use_efficient_attention",
            "can_use_flash_attention",
            "contextlib",
            "cuBLASModule",
            "cuFFTPlanCache",
            "cuFFTPlanCacheAttrContextProp",
            "cuFFTPlanCacheManager",
            "cublas_workspace_size",
            "cublaslt_workspace_size",
            "cudnn_sdp_enabled",
            "cufft_plan_cache",
            "deprecated",
            "enable_cudnn_sdp",
            "enable_flash_sdp",
            "enable_math_sdp",
            "enable_mem_efficient_sdp",
            "flash_sdp_enabled",
            "fp16_bf16_reduction_math_sdp_allowed",
            "is_built",
            "is_ck_sdpa_available",
            "is_flash_attention_available",
            "math_sdp_enabled",
            "matmul",
            "mem_efficient_sdp_enabled",
            "preferred_blas_library",
            "preferred_linalg_library",
            "preferred_rocm_fa_library",
            "sdp_kernel",
            "torch",
        ]
    ),
    "cudnn": frozenset(
        [
            "CUDNN_TENSOR_DTYPES",
            "ContextProp",
            "CudnnModule",
            "Optional",
            "PropModule",
            "_FP32Precision",
            "_cudnn",
            "_get_fp32_precision_getter",
            "_init",
            "_set_fp32_precision_setter",
            "allow_tf32",
            "benchmark",
            "benchmark_limit",
            "contextmanager",
            "conv",
            "depthwise_kernel",
            "deterministic",
            "enabled",
            "flags",
            "fp32_precision",
            "is_acceptable",
            "is_available",
            "m",
            "os",
            "rnn",
            "set_flags",
            "sys",
            "torch",
            "version",
            "warnings",
        ]
    ),
    "cusparselt": frozenset(["Optional", "_cusparselt", "_init", "get_max_alg_id", "is_available", "torch", "version"]),
    "kleidiai": frozenset(["is_available", "torch"]),
    "mha": frozenset(["_is_fastpath_enabled", "get_fastpath_enabled", "set_fastpath_enabled", "torch"]),
    "miopen": frozenset(
        [
            "ContextProp",
            "MiopenModule",
            "PropModule",
            "contextmanager",
            "flags",
            "immediate",
            "m",
            "set_flags",
            "sys",
            "torch",
        ]
    ),
    "mkl": frozenset(["VERBOSE_OFF", "VERBOSE_ON", "is_available", "torch", "verbose"]),
    "mkldnn": frozenset(
        [
            "ContextProp",
            "MkldnnModule",
            "PropModule",
            "TYPE_CHECKING",
            "VERBOSE_OFF",
            "VERBOSE_ON",
            "VERBOSE_ON_CREATION",
            "_FP32Precision",
            "_get_fp32_precision_getter",
            "_set_fp32_precision_setter",
            "allow_tf32",
            "contextmanager",
            "conv",
            "deterministic",
            "enabled",
            "flags",
            "fp32_precision",
            "is_acl_available",
            "is_available",
            "m",
            "matmul",
            "rnn",
            "set_flags",
            "sys",
            "torch",
            "verbose",
        ]
    ),
    "mps": frozenset(
        [
            "Optional",
            "TYPE_CHECKING",
            "_Library",
            "_lru_cache",
            "get_core_count",
            "get_name",
            "is_available",
            "is_built",
            "is_macos13_or_newer",
            "is_macos_or_newer",
            "torch",
        ]
    ),
    "nnpack": frozenset(["ContextProp", "PropModule", "contextmanager", "flags", "is_available", "set_flags", "torch"]),
    "openmp": frozenset(["is_available", "torch"]),
    "opt_einsum": frozenset(
        [
            "Any",
            "ContextProp",
            "OptEinsumModule",
            "PropModule",
            "_get_enabled",
            "_get_strategy",
            "_lru_cache",
            "_opt_einsum",
            "_set_enabled",
            "_set_strategy",
            "contextmanager",
            "enabled",
            "flags",
            "get_opt_einsum",
            "is_available",
            "m",
            "set_flags",
            "strategy",
            "sys",
            "warnings",
        ]
    ),
    "python_native": frozenset(
        [
            "ContextProp",
            "DSLController",
            "PropModule",
            "PythonNativeModule",
            "_get_dsl_controller",
            "_get_dsl_module",
            "_get_dsl_registry",
            "_get_filter_state",
            "_get_registry_functions",
            "_preserve_filter_state",
            "all_dsls",
            "available_dsls",
            "contextmanager",
            "cutedsl",
            "disable_dispatch_keys",
            "disable_operations",
            "enable_dispatch_keys",
            "enable_operations",
            "flags_frozen",
            "functools",
            "get_dsl_operations",
            "is_dsl_disabled",
            "is_operation_disabled",
            "m",
            "operations_disabled",
            "sys",
            "triton",
            "types",
        ]
    ),
    "quantized": frozenset(
        [
            "QuantizedEngine",
            "_QEngineProp",
            "_SupportedQEnginesProp",
            "_get_qengine_id",
            "_get_qengine_str",
            "engine",
            "m",
            "supported_engines",
            "sys",
            "torch",
            "types",
        ]
    ),
    "xeon": frozenset([]),
    "xnnpack": frozenset(["XNNPACKEngine", "_XNNPACKEnabled", "enabled", "m", "sys", "torch", "types"]),
}


def from_torch() -> dict[str, set[str]]:
    """The names of each ``torch.backends`` module of the installed torch (it imports torch)."""
    import importlib
    import pkgutil
    import types

    import torch.backends

    out: dict[str, set[str]] = {}
    for info in pkgutil.iter_modules(torch.backends.__path__):
        try:
            obj = getattr(torch.backends, info.name, None) or importlib.import_module(f"torch.backends.{info.name}")
        except Exception:  # a backend whose import fails on this machine
            continue
        names = set(dir(obj)) | set(dir(type(obj)))
        inner = getattr(obj, "m", None)  # torch's PropModule wraps the real module in .m
        if isinstance(inner, types.ModuleType):
            names |= set(dir(inner))
        if isinstance(obj, types.ModuleType) and not info.name.startswith("_"):
            out[info.name] = {n for n in names if not n.startswith("__")}
    return out
