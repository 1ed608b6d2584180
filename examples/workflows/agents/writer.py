#!/usr/bin/env python3
"""The editor's writing chain: `draft` writes a draft from the report and the follow-up,
`polish` (its handoff) tightens it. Both report `$usage`, so the accounting rolls the
draft's cost up to `polish`, the chain's last stage, which owns the answer.
"""
import json
import sys

message = json.load(sys.stdin)
node = message["node"]
view = message["input"]

if node == "draft":
    report = view["report"]
    text = (
        f"On '{report['findings']['question']}': {len(report['findings']['items'])} "
        f"sources found; the most reliable says {view['followup']['answer']}."
    )
    out = {"draft": {"text": text}}
    usage = {"input_tokens": 120, "output_tokens": 40, "cost_usd": 0.002}
else:
    text = view["draft"]["text"].replace("sources found; the most reliable says", "sources;")
    out = {"answer": {"text": text}}
    usage = {"input_tokens": 50, "output_tokens": 30, "cost_usd": 0.001}

out["$usage"] = usage
json.dump(out, sys.stdout)
