"""Facts: what the probe reads on the node and from its helpers, gathered in one order
(gather.py), and the readings the checks share (ptxas.py)."""
