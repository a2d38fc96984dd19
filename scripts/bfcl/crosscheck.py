"""Cross-check callcheck's value_match against BFCL's own AST checker.

For imported BFCL tasks, perturbs each gold answer (strings re-cased or re-punctuated, ints for
floats and back, lists reversed, dictionary keys dropped, optional parameters left out, calls
reordered), scores every variant with `callcheck check`, and, where it passes conformance,
compares its value_match with what BFCL's ast_checker says about the same output.

    pip download --no-deps bfcl-eval && unzip -q bfcl_eval-*.whl -d bfcl
    callcheck import bfcl --from bfcl_eval-*.whl --out /tmp/bfcl-tasks
    python3 scripts/bfcl/crosscheck.py bfcl /tmp/bfcl-tasks target/release/callcheck 1500

BFCL's checker needs only its own modules; the model registry it imports is stubbed (every
model is taken to turn dots into underscores, as OpenAI-compatible endpoints need). Tasks with
recorded repairs are left out: a repair changes the possible answers on purpose.
"""
import sys, types, json, glob, os, subprocess, copy, random
if len(sys.argv) < 4:
    sys.exit(__doc__)
WHEEL_DIR, TASKS, BIN = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, WHEEL_DIR)
class Cfg: underscore_to_dot = True
class AnyMap(dict):
    def __getitem__(self, k): return Cfg()
mc = types.ModuleType("bfcl_eval.constants.model_config"); mc.MODEL_CONFIG_MAPPING = AnyMap()
sys.modules["bfcl_eval.constants.model_config"] = mc
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
from bfcl_eval.constants.enums import Language
random.seed(1)
DATA = os.path.join(WHEEL_DIR, "bfcl_eval/data")
docs = {}; answers = {}
for f in glob.glob(DATA + "/BFCL_v4_*.json"):
    if "format_sensitivity" in f or "memory" in f or "web_search" in f or "multi_turn" in f: continue
    for l in open(f):
        d = json.loads(l); docs[d["id"]] = d
for f in glob.glob(DATA + "/possible_answer/BFCL_v4_*.json"):
    if "format_sensitivity" in f or "memory" in f or "web_search" in f or "multi_turn" in f: continue
    for l in open(f):
        d = json.loads(l); answers[d["id"]] = d
def lang(cat):
    if "javascript" in cat: return Language.JAVASCRIPT
    if "java" in cat: return Language.JAVA
    return Language.PYTHON
def mutate_str(s):
    r = random.random()
    if r < 0.3: return s.upper()
    if r < 0.5: return s.replace(" ", "_") + "."
    if r < 0.7: return s + " x"
    if r < 0.85: return "'" + s + "'"
    return s[::-1]
def mutate(v):
    if isinstance(v, bool): return not v
    if isinstance(v, int): return random.choice([float(v), v + 1, str(v)])
    if isinstance(v, float): return random.choice([int(v) if v == int(v) else v + 1, v + 0.5])
    if isinstance(v, str): return mutate_str(v)
    if isinstance(v, list):
        if len(v) > 1 and random.random() < 0.5: return list(reversed(v))
        return [mutate(x) for x in v]
    if isinstance(v, dict):
        if v and random.random() < 0.4:
            k = random.choice(list(v)); w = dict(v); del w[k]; return w
        return {k: mutate(x) for k, x in v.items()}
    return v
tasks = sorted(glob.glob(os.path.join(TASKS, "*/*.json")))
random.shuffle(tasks)
N = int(sys.argv[4]) if len(sys.argv) > 4 else 600
agree = disagree = skipped = 0
out = []
counts = {}
ONLY = os.environ.get("ONLY")
import tempfile
WORK = tempfile.mkdtemp()
for path in tasks:
    if agree + disagree >= N: break
    if ONLY and ONLY not in path: continue
    t = json.load(open(path))
    if "calls" not in t["expect"] or t["expect"].get("any_call"): continue
    src = t["source"]; bid = src["id"]; cat = src["category"]
    if src.get("repairs"): continue
    calls = t["expect"]["calls"]
    for variant in range(3):
        out_calls = []
        for c in calls:
            args = copy.deepcopy(c["gold"])
            if variant > 0 and args:
                k = random.choice(list(args))
                if random.random() < 0.2 and len(args) > 1:
                    del args[k]
                else:
                    args[k] = mutate(args[k])
            out_calls.append((c["tool"], args))
        if variant == 2 and len(out_calls) > 1: out_calls.reverse()
        resp = {"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, (n, a) in enumerate(out_calls)]}}]}
        rp = os.path.join(WORK, "response.json"); json.dump(resp, open(rp, "w"))
        v = json.loads(subprocess.run([BIN, "check", "--task", path, "--response", rp], capture_output=True, text=True).stdout)
        if v["outcome"] != "pass":
            skipped += 1; continue
        ours = v["value_match"]
        model_output = [{n: a} for n, a in out_calls]
        try:
            r = ast_checker(copy.deepcopy(docs[bid]["function"]), model_output, answers[bid]["ground_truth"], lang(cat), cat, "gpt-4o-2024-11-20-FC")
            theirs = r["valid"]
        except Exception as e:
            theirs = "crash:" + type(e).__name__
        counts[(cat.split("_")[-1] if "java" in cat else "python", ours)] = counts.get((cat.split("_")[-1] if "java" in cat else "python", ours), 0) + 1
        if ours == theirs: agree += 1
        else:
            disagree += 1; out.append((bid, out_calls, ours, theirs, r.get("error") if isinstance(theirs, bool) else None))
print(counts)
print(f"agree {agree}, disagree {disagree}, not a conformance pass (no value_match) {skipped}")
for o in out[:30]: print(json.dumps(o, default=str)[:600])
