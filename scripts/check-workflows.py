#!/usr/bin/env python3
"""Checks callcheck's workflows, its workflow examples and its Action (SPEC §12, turn 5):

- every `uses:` of an action that is not in this repository is pinned by a 40-hex commit
  (a tag or a branch can be moved upstream; a commit cannot);
- no write permission at the workflow's level, and in a job only when the job publishes (it
  uses one of the publishing actions below): a job that builds code may only read;
- no secret in a workflow's or a job's `env:`, where every step, `cargo build` included,
  would see it: a secret goes to the step that uses it.

Run by .ci/run; prints what it checked and exits 1 on the first file with a problem, naming
each problem. Needs a YAML parser: PyYAML, or ruamel.yaml (check-jsonschema's, in CI's venv).
"""
import glob
import os
import re
import sys

try:
    import yaml

    def load(text):
        return yaml.safe_load(text)
except ImportError:  # CI's venv has check-jsonschema, which brings ruamel.yaml
    from ruamel.yaml import YAML

    def load(text):
        return YAML(typ="safe").load(text)

# Actions whose job publishes something: only such a job may hold a write permission.
PUBLISHERS = (
    "actions/deploy-pages",
    "docker/build-push-action",
    "softprops/action-gh-release",
    "pypa/gh-action-pypi-publish",
)
PINNED = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")


def grants_write(permissions):
    if permissions in ("write-all",):
        return True
    if isinstance(permissions, dict):
        return any(v == "write" for v in permissions.values())
    return False


def steps_uses(steps):
    return [s.get("uses") for s in steps or [] if isinstance(s, dict) and s.get("uses")]


def secret_in(env):
    return isinstance(env, dict) and any("secrets." in str(v) for v in env.values())


def check(path):
    with open(path, encoding="utf-8") as f:
        doc = load(f.read())
    problems = []
    uses = []
    if "runs" in doc:  # an action
        uses += steps_uses(doc["runs"].get("steps"))
    jobs = doc.get("jobs") or {}
    if grants_write(doc.get("permissions")):
        problems.append("the workflow's own permissions grant write: grant it to the job that publishes")
    if secret_in(doc.get("env")):
        problems.append("a secret in the workflow's env: every step would see it")
    for name, job in jobs.items():
        job_uses = steps_uses(job.get("steps"))
        if job.get("uses"):
            job_uses.append(job["uses"])
        uses += job_uses
        if grants_write(job.get("permissions")) and not any(
            u.split("@")[0] in PUBLISHERS for u in job_uses
        ):
            problems.append(f"job {name} may write but publishes nothing: give it read permissions only")
        if secret_in(job.get("env")):
            problems.append(f"a secret in job {name}'s env: give it to the step that uses it")
    remote = [u for u in uses if not (u.startswith("./") or u.startswith("docker://"))]
    for u in remote:
        if not PINNED.match(u):
            problems.append(f"uses: {u} is not pinned by a 40-hex commit")
    return len(remote), problems


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sorted(
        glob.glob(os.path.join(root, "examples", "*.yml"))
        + glob.glob(os.path.join(root, ".github", "workflows", "*.yml"))
        + [os.path.join(root, "action.yml")]
    )
    failed = False
    for path in files:
        n, problems = check(path)
        rel = os.path.relpath(path, root)
        if problems:
            failed = True
            for p in problems:
                print(f"{rel}: {p}")
        else:
            print(f"{rel}: {n} actions pinned by commit, write permissions only where it publishes, secrets only in steps")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
