#!/usr/bin/env python3
"""The primary: reads the advice slice's tagged text and reports what it was told."""
import json
import re
import sys

message = json.load(sys.stdin)
advice = message["input"]["advice"]
tagged = advice["tagged"]
heard = re.findall(r'<advisory__[0-9a-f]{12} agent="([^"]+)">', tagged)
ok = [r["advisor"] for r in advice["reports"] if r["status"] == "ok"]
failed = {r["advisor"]: r["status"] for r in advice["reports"] if r["status"] != "ok"}
json.dump({"decision": {"advisors_heard": heard, "usable": ok, "failed": failed,
                        "tagged_chars": len(tagged)}}, sys.stdout)
