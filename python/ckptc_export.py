"""ckptc_export.py — export a PyTorch model to ONNX the way ckptc trains it.

ONNX does not say which initializers are parameters: PyTorch writes its buffers (attention
masks, RoPE cos/sin tables, BatchNorm running statistics) as initializers too, and a compiler
that trains every float initializer trains the buffers as well. This module exports in training
mode with the options ckptc expects, then writes the model's ``metadata_props`` entry
``ckptc.trainable``: a JSON array of the initializer names of ``model.named_parameters()``
(those with ``requires_grad``). ckptc trains exactly those and keeps every other initializer
constant. It uses your own torch and onnx packages; nothing else.

    import torch, sys
    sys.path.insert(0, "python")            # this directory of the ckptc checkout
    from ckptc_export import export

    model = MyModel()
    x = torch.randn(8, 64)
    trainable = export(model, (x,), "model.onnx", input_names=["x"], output_names=["logits"],
                       dynamic_axes={"x": {0: "batch"}})
    # then: ckptc model.onnx --dim batch=8 -o build/m

Stochastic depth: torchvision's StochasticDepth (convnext, efficientnet, efficientnet_v2, swin,
maxvit) draws its mask with ``torch.empty(size).bernoulli_(p)``, which torch 1.13's exporter
refuses ("ONNX export of operator Bernoulli, out parameter is not supported"). During the export
only, ``export`` replaces ``torchvision.ops.stochastic_depth.stochastic_depth`` (the function the
module calls) with one computing the same thing as ``Bernoulli(full(size, 1 - p)) / (1 - p)``,
where the Bernoulli is an autograd Function whose ONNX symbolic is the ONNX ``Bernoulli`` op
(opset 15+), and puts the original back afterwards (also on errors). ``torch.bernoulli`` itself
would export as ``RandomUniformLike`` + ``Less``, whose eval-mode value (ckptc's random ops return
their expectation in eval: uniform -> (low + high) / 2) would not make the block the identity;
``Bernoulli`` returns p in eval, so noise = p / p = 1 and the block is the identity, as in
PyTorch's ``model.eval()``. Models without torchvision, or without stochastic depth, export as
they would without the patch.

Names: the exporter (TorchScript-based torch.onnx.export with do_constant_folding=False) names
each parameter's initializer after the parameter, so the map is normally the identity. A
requires_grad parameter with no initializer of its name is handled so:
  - tied weights (the same tensor under another name, e.g. an embedding shared with the head):
    the initializer is the other name's, which is listed; nothing to add;
  - otherwise the float initializers named after no parameter or buffer whose shape and values
    equal the parameter's: exactly one is taken as the parameter under a new name; none means the
    exported graph does not use it (a module forward never calls): left out, with a warning;
    several (e.g. two zero biases of one shape) raise ValueError, since guessing could train a
    buffer or freeze a weight.
"""
import json
import warnings

KEY = "ckptc.trainable"


def _onnx():
    """onnx, imported after restoring the NumPy aliases Debian 12's python3-onnx 1.12 still uses."""
    import numpy as np
    for alias, typ in (("float", float), ("int", int), ("bool", bool), ("object", object)):
        if alias not in np.__dict__:
            setattr(np, alias, typ)
    import onnx
    from onnx import numpy_helper
    return onnx, numpy_helper


def _named_parameters(model):
    """Every (name, parameter), tied ones under each of their names where torch can say (>= 2.0)."""
    try:
        return list(model.named_parameters(remove_duplicate=False))
    except TypeError:
        return list(model.named_parameters())


def _renamed(onnx, numpy_helper, graph, p, known):
    """The one initializer not named after a parameter or buffer that holds p's shape and values."""
    want = p.detach().cpu().numpy()
    hits = []
    for t in graph.initializer:
        if t.name in known or t.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                                  onnx.TensorProto.FLOAT16):
            continue
        if tuple(t.dims) != tuple(want.shape):
            continue
        if (numpy_helper.to_array(t) == want).all():
            hits.append(t.name)
    return hits


def trainable_names(model, onnx_model):
    """The initializer names of model's requires_grad parameters in onnx_model (see the module doc)."""
    onnx, numpy_helper = _onnx()
    graph = onnx_model.graph
    inits = {t.name for t in graph.initializer}
    known = {n for n, _ in _named_parameters(model)} | {n for n, _ in model.named_buffers()}
    names, seen = [], set()
    params = [(n, p) for n, p in _named_parameters(model) if p.requires_grad]
    for name, p in params:  # first the ones named after themselves
        if name in inits and id(p) not in seen:
            names.append(name)
            seen.add(id(p))
    for name, p in params:  # then the others: tied to one of those, renamed, or unused
        if id(p) in seen:
            continue
        hits = _renamed(onnx, numpy_helper, graph, p, known)
        if len(hits) > 1:
            raise ValueError(f"parameter '{name}' has no initializer of its name and {len(hits)} unnamed initializers "
                             f"hold its values ({', '.join(hits[:4])}): cannot tell which is the parameter")
        if hits and hits[0] not in names:
            names.append(hits[0])
            seen.add(id(p))
    unused = [name for name, p in params if id(p) not in seen]
    if unused:
        warnings.warn(f"{len(unused)} parameters are not in the exported graph (unused by forward), left out of "
                      f"{KEY}: {', '.join(unused[:8])}{' ...' if len(unused) > 8 else ''}")
    return names


def set_trainable(onnx_model, names):
    """Writes (or replaces) the ckptc.trainable entry of onnx_model."""
    for e in list(onnx_model.metadata_props):
        if e.key == KEY:
            onnx_model.metadata_props.remove(e)
    e = onnx_model.metadata_props.add()
    e.key, e.value = KEY, json.dumps(list(names))


def _register_missing_symbolics():
    """ONNX forms for ATen ops that torch 1.13's exporter lacks, registered once: `aten::zero`
    (what `t[a:b].zero_()` traces to, e.g. torchvision's Swin v2 attention bias) as zeros of
    its input's shape and dtype."""
    import torch
    from torch.onnx import symbolic_opset9
    if getattr(_register_missing_symbolics, "done", False):
        return
    torch.onnx.register_custom_op_symbolic("aten::zero", lambda g, self: symbolic_opset9.zeros_like(g, self), 9)
    _register_missing_symbolics.done = True

def _bernoulli_fn():
    """An autograd Function: torch.bernoulli forward, exported as the ONNX Bernoulli op."""
    import torch

    class Bernoulli(torch.autograd.Function):
        @staticmethod
        def forward(ctx, p):
            return torch.bernoulli(p)

        @staticmethod
        def symbolic(g, p):
            return g.op("Bernoulli", p)

    return Bernoulli


def _exportable_stochastic_depth(bernoulli):
    """torchvision.ops.stochastic_depth, with the mask drawn by an exportable Bernoulli."""
    import torch

    def stochastic_depth(input, p, mode, training=True):
        if p < 0.0 or p > 1.0:
            raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
        if mode not in ["batch", "row"]:
            raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
        if not training or p == 0.0:
            return input
        survival_rate = 1.0 - p
        size = [input.shape[0]] + [1] * (input.ndim - 1) if mode == "row" else [1] * input.ndim
        noise = bernoulli.apply(torch.full(size, survival_rate, dtype=input.dtype, device=input.device))
        if survival_rate > 0.0:
            noise = noise / survival_rate
        return input * noise

    return stochastic_depth


class _patched_stochastic_depth:
    """Within the block, torchvision's StochasticDepth draws through an exportable Bernoulli (see
    the module doc); nothing happens without torchvision."""

    def __enter__(self):
        import sys
        try:
            import torchvision.ops.stochastic_depth  # noqa: F401
        except ImportError:
            self.mod = None
            return self
        # torchvision.ops re-exports the function under the submodule's name: take the module itself
        self.mod = sys.modules["torchvision.ops.stochastic_depth"]
        self.saved = self.mod.stochastic_depth
        self.mod.stochastic_depth = _exportable_stochastic_depth(_bernoulli_fn())
        return self

    def __exit__(self, *exc):
        if self.mod is not None:
            self.mod.stochastic_depth = self.saved
        return False


def export(model, args, path, input_names=None, output_names=None, dynamic_axes=None, opset=17):
    """Exports model (called on args) to path in training mode and declares its trainable
    initializers; returns their names. The model is left as it was (mode and buffers), and the
    file's buffers are the model's before the export (not after the tracing forward).
    torchvision's stochastic depth exports as ONNX Bernoulli (see the module doc)."""
    import torch
    onnx, numpy_helper = _onnx()
    was_training = model.training
    # tracing runs one training-mode forward, which moves BatchNorm's running statistics (and
    # num_batches_tracked): the buffers are put back, in the model and in the file
    saved = {n: b.detach().clone() for n, b in model.named_buffers()}
    _register_missing_symbolics()
    try:
        with _patched_stochastic_depth():
            torch.onnx.export(model, args, path, input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic_axes, opset_version=opset, do_constant_folding=False,
                              training=torch.onnx.TrainingMode.TRAINING)
    finally:
        with torch.no_grad():
            for n, b in model.named_buffers():
                b.copy_(saved[n])
        model.train(was_training)
    m = onnx.load(path, load_external_data=False)
    for i, init in enumerate(m.graph.initializer):
        if init.name in saved and not init.external_data:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(saved[init.name].cpu().numpy(), init.name))
    names = trainable_names(model, m)
    set_trainable(m, names)
    onnx.save(m, path)
    return names
