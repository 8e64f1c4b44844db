"""`fleetcheck fix`: plan the repair of failing nodes, apply the safe part, probe again."""

from fleetcheck.fix.plan import FixPlan, ManualAction, NodePlan, Step, plan_node, plan_report

__all__ = ["FixPlan", "ManualAction", "NodePlan", "Step", "plan_node", "plan_report"]
