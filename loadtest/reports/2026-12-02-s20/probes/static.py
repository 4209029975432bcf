import sys, time, statistics
sys.path.insert(0, "/work/main")
import numpy as np, onnxruntime as ort
from pathlib import Path
from onnxruntime.quantization import quantize_static, QuantType, QuantFormat, CalibrationDataReader, CalibrationMethod
from onnxruntime.quantization.shape_inference import quant_pre_process
from gateway import features as feat
from gateway.evaluate import read_rows, Skipped

rows = read_rows(Path("/tmp/s20/calib101.jsonl"), Skipped())
inputs = feat.model_inputs([r.features for r in rows])
src = "models/repository/clef-flash/1.7.0/model.onnx"
pre = "/tmp/s20/pre.onnx"
quant_pre_process(src, pre, skip_symbolic_shape=True)

class Reader(CalibrationDataReader):
    def __init__(self, items, bs=64):
        groups = {}
        for x in items: groups.setdefault(feat.bucket_length(len(x.ids)), []).append(x)
        self.batches = []
        for g in groups.values():
            for k in range(0, len(g), bs):
                ids, num = feat.pad_batch(g[k:k+bs]); self.batches.append({"ids": ids, "numeric": num})
        self.it = iter(self.batches)
    def get_next(self): return next(self.it, None)
    def rewind(self): self.it = iter(self.batches)

method = {"minmax": CalibrationMethod.MinMax, "pct": CalibrationMethod.Percentile, "entropy": CalibrationMethod.Entropy}[sys.argv[1]]
act = {"u8": QuantType.QUInt8, "s8": QuantType.QInt8}[sys.argv[2]]
out = f"/tmp/s20/static_{sys.argv[1]}_{sys.argv[2]}_{sys.argv[3]}.onnx"
extra = {"ActivationSymmetric": act == QuantType.QInt8}
if sys.argv[1] == "pct": extra["CalibPercentile"] = 99.999
t = time.time()
quantize_static(pre, out, Reader(inputs[:2000]), quant_format=QuantFormat[sys.argv[3]], per_channel=True, weight_type=QuantType.QInt8,
                activation_type=act, op_types_to_quantize=["MatMul", "Gemm"], calibrate_method=method, extra_options=extra)
print("quantized in", round(time.time()-t,1), "s ->", out)
