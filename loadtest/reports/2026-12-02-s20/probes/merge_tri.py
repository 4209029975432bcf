import sys
import numpy as np, onnx
from onnx import helper, numpy_helper
src, dst = sys.argv[1], sys.argv[2]
m = onnx.load(src); g = m.graph
inits = {i.name: i for i in g.initializer}
cons = {}
for n in g.node:
    for i in n.input: cons.setdefault(i, []).append(n)
gathers = [n for n in g.node if n.op_type == "Gather" and n.input[0] in inits and ".trigram." in n.input[0]]
assert len(gathers) >= 2 and len({n.input[1] for n in gathers}) == 1, "trigram gathers must share one index input"
gathers.sort(key=lambda n: n.input[0])
chains = []
for ga in gathers:
    (rs,) = cons[ga.output[0]]; assert rs.op_type == "Reshape"
    (red,) = cons[rs.output[0]]; assert red.op_type == "ReduceSum"
    chains.append((ga, rs, red))
tables = [numpy_helper.to_array(inits[ga.input[0]]) for ga, _, _ in chains]
width = tables[0].shape[1]
merged = numpy_helper.from_array(np.concatenate(tables, axis=1), "trigram.merged.weight")
shape = numpy_helper.from_array(np.array([0, -1, 8, width * len(tables)], np.int64), "trigram.merged.shape")
axes = numpy_helper.from_array(np.array([2], np.int64), "trigram.merged.axes")
split = numpy_helper.from_array(np.array([width] * len(tables), np.int64), "trigram.merged.split")
new = [helper.make_node("Gather", [merged.name, gathers[0].input[1]], ["trigram.merged.g"], name="trigram/merged/Gather", axis=0),
       helper.make_node("Reshape", ["trigram.merged.g", shape.name], ["trigram.merged.r"], name="trigram/merged/Reshape"),
       helper.make_node("ReduceSum", ["trigram.merged.r", axes.name], ["trigram.merged.s"], name="trigram/merged/ReduceSum", keepdims=0),
       helper.make_node("Split", ["trigram.merged.s", split.name], [red.output[0] for _, _, red in chains], name="trigram/merged/Split", axis=2)]
for _, _, red in chains:
    kd = [a for a in red.attribute if a.name == "keepdims"]
    assert kd and kd[0].i == 0, "ReduceSum keepdims must be 0"
drop = {id(x) for c in chains for x in c}
first = min(i for i, n in enumerate(g.node) if id(n) in drop)
keep = [n for n in g.node if id(n) not in drop]
nodes = keep[:first] + new + keep[first:]
del g.node[:]; g.node.extend(nodes)
for ga, _, _ in chains: g.initializer.remove(inits[ga.input[0]])
g.initializer.extend([merged, shape, axes, split])
# topological order: the merged Gather needs its index produced first; sort
onnx.checker.check_model(m)
onnx.save(m, dst); print("wrote", dst)
