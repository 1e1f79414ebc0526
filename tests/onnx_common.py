"""onnx_common.py — what the ONNX node-test scripts share (tests/onnx_shapes.py, the shape-only
check, and tests/onnx_conformance.py, the compile-and-run check).

Importing this module first makes `import onnx` work: it re-executes the script under Debian's
/usr/bin/python3 when the running interpreter has no onnx (a pyenv python3 on PATH), and restores
the NumPy aliases (np.float, np.object, ...) that Debian 12's python3-onnx 1.12 still uses but
NumPy 1.24 removed. Then it offers:

- node_data_dir(WORKDIR): the node tests, the installed copy or generated into WORKDIR once;
- reference(TEST_DIR, graph): graph inputs/outputs paired with their test tensors, and the
  `--dim` bindings the test data implies for symbolic input dims;
- the variant machinery: ckptc's messages for a too-old opset and for a shape-like input that is
  a graph input (OLD_OPSET, RUNTIME_CONST), restamp_opset() and promote_inputs();
- supported_ops() (ir/ops.def), walk_ops(), reason_group() for grouping refusal messages.

Standard library + numpy + onnx only.
"""
import importlib.util
import os
import sys

if importlib.util.find_spec("onnx") is None and os.path.exists("/usr/bin/python3") and \
        os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
    os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)

# Debian 12's python3-onnx (1.12) still uses numpy aliases that numpy 1.24 removed (np.float and
# np.object are hit by the node-test generators; int/bool for good measure). They must exist
# before onnx is imported.
import warnings  # noqa: E402
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)
import numpy as np  # noqa: E402
for _alias, _typ in (("float", float), ("int", int), ("bool", bool), ("object", object)):
    if _alias not in np.__dict__:
        setattr(np, _alias, _typ)
import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402,F401
from onnx import TensorProto  # noqa: E402

import glob  # noqa: E402
import re  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALLED_DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")

# ONNX element type -> ckptc's dtype name (the rest print as ONNX spells them, lower case)
DTYPE_NAMES = {TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64", TensorProto.FLOAT16: "float16",
               TensorProto.INT64: "int64", TensorProto.INT32: "int32", TensorProto.INT16: "int16",
               TensorProto.INT8: "int8", TensorProto.UINT8: "uint8", TensorProto.BOOL: "bool"}


def dtype_name(code):
    if code in DTYPE_NAMES:
        return DTYPE_NAMES[code]
    try:
        return TensorProto.DataType.Name(code).lower()
    except ValueError:
        return "code%d" % code


def supported_ops():
    """ONNX op names from ir/ops.def, plus Constant (the loader turns it into a value)."""
    return set(ops_def_rows()) | {"Constant"}


def ops_def_rows():
    """{ONNX op name: kernel family} for every row of ir/ops.def, in file order."""
    with open(os.path.join(ROOT, "ir", "ops.def")) as f:
        text = f.read()
    rows = {}
    for m in re.finditer(r'^\s*CK_OP\(\s*\w+\s*,\s*"(\w+)"([^\n]*)', text, re.M):
        # the columns after the name: ins (2), outs (2), flags, diff, infer, grad, then the kernel family
        cols = [c.strip() for c in m.group(2).rsplit(")", 1)[0].split(",")]
        rows[m.group(1)] = cols[9] if len(cols) > 9 else ""
    return rows


# ---------------------------------------------------------------- test data

def node_data_dir(workdir):
    """Directory holding test_*/ for the node tests: the installed copy, else data generated into
    WORKDIR/node once (`python3 -m onnx.backend.test.cmd_tools generate-data`, run in-process so
    that the NumPy aliases above apply; a stamp file marks a complete generation)."""
    if len(glob.glob(os.path.join(INSTALLED_DATA, "test_*", "model.onnx"))) > 100:
        return INSTALLED_DATA
    out = os.path.join(workdir, "node")
    stamp = os.path.join(workdir, "GENERATED_BY_ONNX_" + onnx.__version__)
    if not os.path.exists(stamp) or not glob.glob(os.path.join(out, "test_*", "model.onnx")):
        print("generating the ONNX %s backend test data into %s ..." % (onnx.__version__, workdir), flush=True)
        os.makedirs(workdir, exist_ok=True)
        from onnx.backend.test import cmd_tools
        saved = sys.argv
        sys.argv = ["backend-test-tools", "generate-data", "-o", workdir]
        try:
            cmd_tools.main()
        finally:
            sys.argv = saved
        open(stamp, "w").close()
    return out


def load_tensor(path):
    """(dtype name, shape) of a TensorProto file."""
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return dtype_name(t.data_type), list(t.dims)


def load_array(path):
    """The numpy array of a TensorProto file."""
    return onnx.numpy_helper.to_array(onnx.load_tensor(path))


def walk_ops(graph, acc):
    """Adds every op type of graph and its subgraphs to the set acc (domain-qualified when not
    the default domain); returns acc."""
    for n in graph.node:
        acc.add(n.op_type if n.domain in ("", "ai.onnx") else "%s:%s" % (n.domain, n.op_type))
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                walk_ops(g, acc)
    return acc


def reference(tdir, g):
    """Graph inputs (initializers excluded) and outputs paired with their reference (dtype, shape),
    plus --dim bindings for symbolic input dims and any problem binding them.

    Returns (ins, outs, dims, problems): ins is [(name, (dtype, shape) or None, input_i.pb path)],
    outs is [(name, (dtype, shape) or None)], dims {dim_param: N}, problems a list of strings."""
    ds = os.path.join(tdir, "test_data_set_0")
    inits = {t.name for t in g.initializer}
    ins, dims, problems = [], {}, []
    for i, vi in enumerate(g.input):
        pb = os.path.join(ds, "input_%d.pb" % i)
        is_tensor = vi.type.HasField("tensor_type")
        ref = load_tensor(pb) if is_tensor and os.path.exists(pb) else None
        if vi.name in inits:
            continue
        ins.append((vi.name, ref, pb))
        if not is_tensor or not vi.type.tensor_type.HasField("shape"):
            continue
        for k, dm in enumerate(vi.type.tensor_type.shape.dim):
            if not dm.HasField("dim_param"):
                continue
            if ref is None or k >= len(ref[1]):
                problems.append("no reference tensor for symbolic dim '%s' of '%s'" % (dm.dim_param, vi.name))
            elif dims.setdefault(dm.dim_param, ref[1][k]) != ref[1][k]:
                problems.append("symbolic dim '%s' is %d and %d in the test data" %
                                (dm.dim_param, dims[dm.dim_param], ref[1][k]))
    outs = []
    for i, vi in enumerate(g.output):
        pb = os.path.join(ds, "output_%d.pb" % i)
        ok = vi.type.HasField("tensor_type") and os.path.exists(pb)
        outs.append((vi.name, load_tensor(pb) if ok else None))
    return ins, outs, dims, problems


# ---------------------------------------------------------------- variants

# ckptc's messages for a model stamped with too old an opset, and for a shape-like input (Reshape's
# shape, Slice's starts, ...) that is computed at run time (here: a graph input)
OLD_OPSET = re.compile(r"opset (\d+) of the default domain is not supported \(ckptc supports (\d+) to")
RUNTIME_CONST = re.compile(r"input \d+ '([^']*)' \w+ \([^)]*\) must be a constant known at compile time")


def restamp_opset(model, reason):
    """Re-stamps model (in place) with ckptc's lowest opset, read from the refusal message reason;
    returns the target, or None when some op's schema changed between the model's opset and the
    target (then the model is left as it was)."""
    m = OLD_OPSET.search(reason)
    old, target = int(m.group(1)), int(m.group(2))
    for n in model.graph.node:
        try:
            if onnx.defs.get_schema(n.op_type, target, n.domain).since_version > old:
                return None
        except onnx.defs.SchemaError:
            return None
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = target
    return target


def promote_inputs(model, ins, names):
    """Turns the graph inputs named in names into initializers holding the test's data (their
    input_i.pb), in place; returns ins without them. Names with no tensor data are left alone."""
    g = model.graph
    for name in names:
        src = [x for x in ins if x[0] == name and x[1] is not None]
        if not src:
            continue
        t = onnx.load_tensor(src[0][2])
        t.name = name
        g.initializer.append(t)
        keep = [vi for vi in g.input if vi.name != name]
        del g.input[:]
        g.input.extend(keep)
        ins = [x for x in ins if x[0] != name]
    return ins


# ---------------------------------------------------------------- reports

def strip_error_prefix(line):
    """'ckptc: error: /path/model.onnx: msg' -> 'msg', so that reasons group across tests."""
    return re.sub(r"^ckptc: error: (\S*model\.onnx: )?", "", line)


def reason_group(reason):
    """A coarse key for grouping refusal messages: names, numbers and shapes removed."""
    r = re.sub(r"^node '[^']*' \(([^)]*)\): ", r"\1: ", reason)
    r = re.sub(r"'[^']*'", "'…'", r)
    r = re.sub(r"\([0-9,]*\)", "(…)", r)
    r = re.sub(r"(?<!\w)-?\d+(?!\w)", "N", r)
    return r
