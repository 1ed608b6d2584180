#!/usr/bin/env python3
"""The research subgraph's node: reads {"node", "input", ...} on stdin, prints its writes.

As `dig` it gathers findings on the question; as `answer` it answers the follow-up the
parent put in its `clarification` slice, from the findings it kept. Both report what the
step cost in `$usage` (a made-up token count and price), so `pactgraph runs show` and the
run's `accounting` have something to sum.
"""
import json
import sys

message = json.load(sys.stdin)
node = message["node"]
view = message["input"]
question = view.get("question", {}).get("text", "")

if node == "dig":
    findings = [
        {"source": "tide tables", "claim": "high tide at 06:40", "reliability": 0.9},
        {"source": "harbour blog", "claim": "high tide around 07:00", "reliability": 0.4},
    ]
    words = len(question.split())
    out = {"findings": {"question": question, "items": findings}}
    usage = {"input_tokens": 40 + words, "output_tokens": 60, "cost_usd": 0.0025}
else:
    asked = view["clarification"]
    best = max(view["findings"]["items"], key=lambda f: f["reliability"])
    out = {
        "followup": {
            "question": asked["question"],
            "asked_by": asked["from"],
            "answer": f"{best['source']}: {best['claim']}",
        }
    }
    usage = {"input_tokens": 90, "output_tokens": 25, "cost_usd": 0.00125}

out["$usage"] = usage
json.dump(out, sys.stdout)
