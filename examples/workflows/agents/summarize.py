#!/usr/bin/env python3
"""An exec node: reads {"node", "input"} on stdin, prints its slice writes on stdout."""
import json
import os
import sys

message = json.load(sys.stdin)
text = message["input"]["request"]["text"]
first = text.split(".")[0].strip()
summary = {"words": len(text.split()), "first_sentence": first}
if os.environ.get("SUMMARY_STYLE") == "short":
    summary["style"] = "short"
json.dump({"summary": summary}, sys.stdout)
