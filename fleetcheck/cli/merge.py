"""`fleetcheck merge`: one audit report from the node documents gathered by Slurm, Kubernetes
or timers, with fleet checks and history as an audit has."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcheck.cli import options
from fleetcheck.cli.inputs import keeping, load_policy
from fleetcheck.cli.runs import finish_run

NAME = "merge"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        NAME, help="one audit report from node documents gathered by Slurm, Kubernetes, "
        "timers",
        description="Assemble the node documents that `fleetcheck probe --format json` printed "
        "on each node, or the probe script itself where fleetcheck is not installed "
        "(`fleetcheck probe --script | python3 -`), into one audit report (files, folders of "
        "*.json, tarballs, - for stdin; node caches and saved audits too) with the playbook's "
        "fleet checks, history and every format, as `fleetcheck audit` would have written it: "
        "each node judged as an audit judges its probe's reply. A node given twice keeps its "
        "newest document; a document older than --max-age leaves its node unverified; an input "
        "that cannot be read is named. Each is one line on stderr and a finding in the report. "
        "See docs/integrations.md.",
        **options.WITH_EXIT_CODES,
    )
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="node document files, folders, tarballs (.tar, .tar.gz), or -")
    options.add_output(parser)
    parser.add_argument("--id", dest="id_template", default="auto", metavar="TEMPLATE",
                        help="how merged nodes are named: 'auto' (default: the Slurm node "
                        "name, else the Kubernetes node name, else the document's id, which is "
                        "the probed machine's host name, else the file's name) or a template "
                        "of {id} {hostname} {slurm_node} {slurm_job} {k8s_node} {pod} "
                        "{namespace} {file}")
    options.add_max_age(parser, "a document probed longer ago leaves its node unverified")
    options.add_playbook(parser, "fleet checks and requirements (default: the built-in default)")
    options.add_history(parser,
                        "keep this merge in DIR and report what changed since the last run")
    return parser


def run(args: argparse.Namespace) -> int:
    from fleetcheck import commands

    kept = keeping(args)
    policy = load_policy(args.playbook)
    return finish_run(commands.merge(commands.MergeRequest(
        args.inputs, policy, id_template=args.id_template, max_age_s=args.max_age,
        keeping=kept)), args)
