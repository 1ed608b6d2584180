#!/usr/bin/env python3
"""A router node: reads {"node", "input", "attempt", "error"?} on stdin and prints its
slice writes plus `$route` (one of its destinations) and `$message` (a note for the
destination, delivered to the router's message_slice)."""
import json
import sys

message = json.load(sys.stdin)
text = message["input"]["ticket"]["text"].lower()
if message.get("error"):
    # A previous answer was refused; the runtime says why. Log it and choose again.
    print(f"retrying after: {message['error']}", file=sys.stderr)

if any(word in text for word in ("refund", "charge", "invoice")):
    route, note, label = "billing_reply", "Billing question: answer from the refund policy.", "billing"
else:
    route, note, label = "investigation", "Not billing: investigate before answering.", "technical"

json.dump(
    {
        "triage": {"label": label},
        "$route": route,
        "$message": note,
    },
    sys.stdout,
)
