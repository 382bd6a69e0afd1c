"""Dynamic int8 quantization of a model's linear layers for CPU inference.

Each ``nn.Linear`` becomes an ``Int8Linear``: its weight W (N, K) is stored in int8 with one
scale per output row (symmetric, s_n = max_k |W_nk| / 127), and at every call the input is
quantized (to 8 bits, or 7: below) with a scale taken from its own range, multiplied in
integers, and rescaled to float32 (fbgemm's dynamic int8 linear, PyTorch's supported int8
path on x86 CPUs). Embeddings, layer norms and attention stay in float32.

The input gets all 8 bits where fbgemm's product sums in 32 bits (AVX-512 VNNI), 7 bits
elsewhere: fbgemm's AVX2 and plain AVX-512 kernels add pairs of 8-bit products in 16 bits,
which 8-bit inputs can saturate (2 x 255 x 127 > 32,767). ``full_range_int8`` tells which by
measurement on the running CPU. On an AMD EPYC with VNNI, 8-bit inputs made the shipped
model's greedy int8 output equal float32's on 162 of the 200 sentences of
``bench/decode_speed.py``, against 134 with 7-bit inputs (its records;
sacreBLEU on the test split: docs/decoding.md).

On a CPU with AMX int8 units (Intel Xeon from Sapphire Rapids on), a product with a large
output runs on oneDNN's dynamic int8 linear instead, which multiplies on those units: it costs
more per call than fbgemm (1.0-2.6x fbgemm's time at 1-16 rows) but less once the output is
large (the output projection from 32 rows: 1.5-2.2x faster; the encoder's layers on a batch
of 2,400 tokens: 1.8-2.7x; ``python bench/experiments/int8_kernels.py``). It takes the
products from 32,768 output entries (rows x output features) on, a threshold set on whole
decoding runs (16,384 or 131,072 were no faster). Its activations are quantized to 8 bits
(AMX sums in 32 bits: no 16-bit pair sums to saturate). Elsewhere (AVX2, AVX-512 without
AMX) fbgemm alone runs.

The projection to the vocabulary (``unembed``) is quantized too unless
``include_output=False``; the classifier head of a text classifier is always kept in float32.
A quantized model saves to and loads from a model directory like any other
(``aiayn.modeldir``): its config.json records the quantization, its weights file the int8
weights and their scales.
"""

from __future__ import annotations

import functools
import threading
import warnings

import torch
from torch import Tensor, nn

METHODS = ("int8",)
# PyTorch 2.13 marks the creation of quantized tensors as deprecated; fbgemm's packed int8
# linear still needs one to pack its weights.
_DEPRECATION = r".*quantized tensor creation functions.*deprecated.*"


def check_method(method: str | None, flag: str = "--quantize") -> str | None:
    """``method`` if it is a known quantization (or None); a clear error otherwise."""
    if method is not None and method not in METHODS:
        raise ValueError(f"{flag} {method!r}: unknown quantization; allowed: {', '.join(METHODS)}")
    return method


# oneDNN's product takes a call from this many output entries (rows x output features) up
# (module doc; bench/experiments/ab_decode.py --mode throughput --int8 with 16384, 65536 and
# 131072 ran 0.99x, 1.00x and 0.98x as fast).
ONEDNN_FROM = 32768
_ENGINE = threading.Lock()  # prepacking reads the process-wide quantized engine


@functools.cache
def amx_int8() -> bool:
    """Whether this CPU has AMX int8 units and PyTorch's oneDNN int8 engine can use them."""
    try:
        has_amx = bool(torch.cpu.get_capabilities().get("amx_int8"))
    except (AttributeError, RuntimeError):  # an older torch, or a CPU it cannot read
        return False
    return has_amx and "onednn" in torch.backends.quantized.supported_engines


@functools.cache
def full_range_int8() -> bool:
    """Whether fbgemm's int8 product takes 8-bit inputs on this CPU without saturating.

    Measured once: a product whose 8-bit inputs (255) and weights (+-127) saturate any 16-bit
    sum of two products, against its value in float; equal only where fbgemm sums in 32 bits.
    """
    k = 64
    weight = torch.full((16, k), 127, dtype=torch.int8)
    weight[1::2] = -127  # rows of both signs: saturation either way
    try:
        packed = _pack(weight, torch.ones(16), None)
        for rows in (1, 64):  # a decoding step's rows and a batch's
            x = torch.ones(rows, k)
            x[:, 0] = 0.0  # inputs span [0, 1]: 1 quantizes to 255 (zero point 0)
            got = torch.ops.quantized.linear_dynamic(x, packed, False)
            exact = x @ weight.float().t()  # +-127 * 63 per output
            if not torch.allclose(got, exact, rtol=1e-4, atol=0.0):
                return False
    except RuntimeError:  # no fbgemm here
        return False
    return True


def _pack(weight: Tensor, scale: Tensor, bias: Tensor | None, engine: str = "fbgemm"):
    """``engine``'s packed form of an int8 weight (N, K) with per-row scales (N,)."""
    zero = torch.zeros(weight.size(0), dtype=torch.long)
    with warnings.catch_warnings(), _ENGINE:
        warnings.filterwarnings("ignore", message=_DEPRECATION)
        q = torch._make_per_channel_quantized_tensor(weight, scale.double(), zero, 0)
        previous = torch.backends.quantized.engine
        torch.backends.quantized.engine = engine
        try:
            return torch.ops.quantized.linear_prepack(q, bias)
        finally:
            torch.backends.quantized.engine = previous


class Int8Linear(nn.Module):
    """y = x W^T + b with W in int8 (per-row scales) and x quantized per call (see module doc).

    The state dict holds ``weight`` (int8, N x K), ``weight_scale`` (N,) and ``bias``; the
    packed forms fbgemm (and, on AMX hosts, oneDNN) multiply with are rebuilt whenever they
    are loaded.
    """

    def __init__(self, weight: Tensor, scale: Tensor, bias: Tensor | None) -> None:
        super().__init__()
        self.in_features, self.out_features = weight.size(1), weight.size(0)
        self.register_buffer("weight", weight.to(torch.int8).contiguous())
        self.register_buffer("weight_scale", scale.float().contiguous())
        self.register_buffer("bias", None if bias is None else bias.float().contiguous())
        self._repack()
        self._rows: dict[tuple[int, int], Int8Linear] = {}

    def _repack(self) -> None:
        self._packed = _pack(self.weight, self.weight_scale, self.bias)
        self._reduce_range = not full_range_int8()  # 7-bit inputs (module doc)
        self._wide = None  # oneDNN's form, for products with a large output (module doc)
        if amx_int8():
            self._wide = _pack(self.weight, self.weight_scale, self.bias, "onednn")

    @classmethod
    def from_float(cls, linear: nn.Linear) -> Int8Linear:
        w = linear.weight.detach().float()  # (N, K)
        scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0  # (N,)
        q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
        bias = linear.bias.detach() if linear.bias is not None else None
        return cls(q, scale, bias)

    def dequantized(self) -> Tensor:
        """The float32 weight (N, K) this layer multiplies with."""
        return self.weight.float() * self.weight_scale[:, None]

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype is not torch.float32:  # (a call to .float() costs even when it returns x)
            x = x.float()
        wide = self._wide is not None and (
            x.numel() // self.in_features * self.out_features >= ONEDNN_FROM
        )
        packed, reduce_range = (self._wide, False) if wide else (self._packed, self._reduce_range)
        # A call through torch.ops first asks each argument for a __torch_function__
        # override. Asked of the packed weights (a torch.ScriptObject), the lookup fails by
        # raising and catching an exception in C++, which costs more than a decoding step's
        # product of a few rows (256 x 256 at 4 rows: 14.8 us a call, 6.5 us without the
        # lookup). The layer's inputs are plain tensors: the call skips overrides by tensor
        # subclasses (torch function modes still apply).
        with torch._C.DisableTorchFunctionSubclass():
            return torch.ops.quantized.linear_dynamic(x, packed, reduce_range)  # (..., N)

    def rows(self, start: int, stop: int) -> Int8Linear:
        """The layer of output features ``start:stop`` (exactly these rows, same scales)."""
        key = (start, stop)
        if key not in self._rows:
            bias = self.bias[start:stop] if self.bias is not None else None
            self._rows[key] = Int8Linear(
                self.weight[start:stop], self.weight_scale[start:stop], bias
            )
        return self._rows[key]

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._repack()
        self._rows = {}

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def _skipped(name: str, include_output: bool) -> bool:
    head = name.split(".")[0]
    return head == "classifier" or (head == "unembed" and not include_output)


@torch.no_grad()
def quantize_int8(model: nn.Module, include_output: bool = True) -> nn.Module:
    """Replace the model's linear layers by ``Int8Linear`` in place; returns the model (eval).

    ``include_output``: quantize the projection to the vocabulary too (on by default: it is
    the largest matrix of a small translation model; see bench/decode_speed.py). The
    quantization is recorded on the model (``model.quantization``) so that
    ``aiayn.modeldir.save_model_dir`` writes it to the model directory.
    """
    if getattr(model, "quantization", None):
        raise ValueError(f"the model is already quantized ({model.quantization['method']})")
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and not _skipped(name, include_output)
    ]
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, Int8Linear.from_float(module))
    # a weight laid out transposed for a float product (aiayn.model.layout) that only an
    # embedding reads now (tied to the quantized output projection) goes back to rows:
    # gathering an embedding's rows from a transposed matrix costs some 6x more (131 tokens
    # of a 4,000 x 256 table: 60 against 10 us)
    linear = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    for p in model.parameters():
        if id(p) not in linear and not p.is_contiguous():
            p.data = p.data.contiguous()
    model.quantization = {"method": "int8", "include_output": include_output}
    return model.eval()


def stored_weights(model: nn.Module) -> int:
    """Numbers the model holds: its parameters plus its int8 layers' weights and biases (a
    quantized copy of a tied output projection counts separately from the embedding)."""
    total = sum(p.numel() for p in model.parameters())
    for module in model.modules():
        if isinstance(module, Int8Linear):
            total += module.weight.numel() + (module.bias.numel() if module.bias is not None else 0)
    return total


def quantize(model: nn.Module, method: str | None, include_output: bool = True) -> nn.Module:
    """``quantize_int8`` for method "int8"; the model as it is for None."""
    if check_method(method) == "int8":
        return quantize_int8(model, include_output=include_output)
    return model
