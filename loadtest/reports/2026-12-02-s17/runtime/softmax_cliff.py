import time, numpy as np, onnxruntime as ort
from onnx import helper, TensorProto
shape = [64, 4, 41, 41]
g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
so = ort.SessionOptions(); so.intra_op_num_threads = 1
a = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
x = np.random.randn(*shape).astype(np.float32)
for v in (None, -10, -20, -40, -60, -80, -86, -88, -95, -104, -110, -200, -1e4, -1e9, -np.inf):
    x2 = x.copy()
    if v is not None: x2[..., 25:] = v
    for _ in range(3): y = a.run(None, {"x": x2})[0]
    t0 = time.perf_counter()
    for _ in range(20): a.run(None, {"x": x2})
    print(f"mask {v}: {(time.perf_counter()-t0)/20/64*1e6:.1f} us/row")
