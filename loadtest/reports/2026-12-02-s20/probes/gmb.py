import numpy as np, onnx, onnxruntime as ort, time, statistics
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
W = 96; V = 8192
t0 = rng.standard_normal((V, W)).astype(np.float32); t1 = rng.standard_normal((V, W)).astype(np.float32)
def model(merged):
    nodes = []; inits = []
    if merged:
        inits.append(numpy_helper.from_array(np.concatenate([t0, t1], 1), "T"))
        inits.append(numpy_helper.from_array(np.array([0, -1, 8, 2*W], np.int64), "shp"))
        nodes += [helper.make_node("Gather", ["T", "h"], ["g"]), helper.make_node("Reshape", ["g", "shp"], ["r"]),
                  helper.make_node("ReduceSum", ["r", "ax"], ["s"], keepdims=0),
                  helper.make_node("Split", ["s", "sp"], ["o0", "o1"], axis=2)]
        inits += [numpy_helper.from_array(np.array([2], np.int64), "ax"), numpy_helper.from_array(np.array([W, W], np.int64), "sp")]
    else:
        inits += [numpy_helper.from_array(t0, "T0"), numpy_helper.from_array(t1, "T1"),
                  numpy_helper.from_array(np.array([0, -1, 8, W], np.int64), "shp"), numpy_helper.from_array(np.array([2], np.int64), "ax")]
        for i in (0, 1):
            nodes += [helper.make_node("Gather", [f"T{i}", "h"], [f"g{i}"]), helper.make_node("Reshape", [f"g{i}", "shp"], [f"r{i}"]),
                      helper.make_node("ReduceSum", [f"r{i}", "ax"], [f"o{i}"], keepdims=0)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("h", TensorProto.INT64, ["b", "l"])],
                          [helper.make_tensor_value_info(f"o{i}", TensorProto.FLOAT, None) for i in (0, 1)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = ort.SessionOptions(); so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
h = rng.integers(0, V, (16, 192)).astype(np.int64)
a, b = model(False), model(True)
oa, ob = a.run(None, {"h": h}), b.run(None, {"h": h})
print("identical:", all(np.array_equal(x, y) for x, y in zip(oa, ob)))
for r in range(3):
    for name, s in (("two", a), ("merged", b)):
        xs = []
        for _ in range(300):
            t = time.perf_counter(); s.run(None, {"h": h}); xs.append(time.perf_counter() - t)
        print(r, name, f"{statistics.median(xs)*1e6:.1f} us")
