"""The `lookup_order` tool of agent_tool_call.json: reads {"node", "input": ARGUMENTS,
"run_id", "step", "attempt"} on stdin and prints the order it finds (a fixed table
standing in for a database)."""

import json
import sys

ORDERS = {
    "A-1042": {"status": "shipped", "shipped_on": "2026-11-20"},
    "A-1043": {"status": "packing", "shipped_on": None},
}

request = json.load(sys.stdin)
order_id = str(request.get("input", {}).get("order_id", "")).strip().upper()
order = ORDERS.get(order_id)
if order is None:
    print(json.dumps({"order_id": order_id, "found": False}))
else:
    print(json.dumps({"order_id": order_id, "found": True, **order}))
