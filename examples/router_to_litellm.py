#!/usr/bin/env python3
"""Turn callcheck's data/router.json into a LiteLLM router configuration (docs/router.md).

    python3 examples/router_to_litellm.py site/data/router.json callcheck.toml validator.json > litellm.yaml

LiteLLM acts on what it can see: an exception (a refused request, a timeout, a 5xx). So the
`transport_error` chain of each row becomes its retries and fallbacks. The chains after a
visible *label* need a validator in the application (LiteLLM does not check a tool call against
its schema): they are written to VALIDATOR_JSON, per row and label, for that validator to read.
Only the standard library: the YAML is written by hand (JSON is YAML).
"""
import json
import sys
import tomllib


def main(router_path, config_path, validator_path):
    with open(router_path, encoding="utf-8") as f:
        router = json.load(f)
    with open(config_path, "rb") as f:
        rows = {m["name"]: m for m in tomllib.load(f).get("model", [])}
    model_list, fallbacks, retries, validator = [], [], {}, {}
    for m in router["models"]:
        name = m["model"]
        row = rows.get(name)
        if row is None:
            print(f"router_to_litellm: {name} is not a [[model]] of {config_path}: skipped", file=sys.stderr)
            continue
        params = {"model": "openai/" + row["model"], "api_base": row["base_url"]}
        if "api_key_env" in row:
            params["api_key"] = "os.environ/" + row["api_key_env"]
        model_list.append({"model_name": name, "litellm_params": params})
        for entry in m["on"]:
            actions = entry["chain"]
            if entry["trigger"] == "transport_error":
                # LiteLLM retries the same group first, then falls back: a chain that starts
                # with a reroll is one retry; every fallback in it names the group to try.
                if actions[0]["action"] == "reroll":
                    retries[name] = {"TimeoutErrorRetries": 1, "InternalServerErrorRetries": 1}
                to = [a["model"] for a in actions if a["action"] == "fallback" and a["model"] in rows]
                if to:
                    fallbacks.append({name: to})
            else:
                validator.setdefault(name, {})[entry["trigger"]] = {
                    "chain": actions,
                    "success": entry["success"]["rate"],
                    "requests": entry["requests"],
                }
    config = {
        "model_list": model_list,
        "router_settings": {
            "num_retries": 0,
            "fallbacks": fallbacks,
            "model_group_retry_policy": retries,
        },
    }
    for key, value in config.items():
        print(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    with open(validator_path, "w", encoding="utf-8") as f:
        json.dump(validator, f, ensure_ascii=False, indent=2)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: router_to_litellm.py ROUTER_JSON CALLCHECK_TOML VALIDATOR_JSON")
    main(sys.argv[1], sys.argv[2], sys.argv[3])
