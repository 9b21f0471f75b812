"""The `nbdemo` command: list, history, run, sweep, book, bench."""
import argparse
import difflib
import json
import os
import re
import shutil
import sys

from nbdemo import resolve_device
from nbdemo.claims.registry import CLAIMS
from nbdemo.ml import datacheck
from nbdemo.runs import devices, evidence, history, params, rules, runner, store


class Parser(argparse.ArgumentParser):
    """Errors in one line, without the usage block. A value that reads as a number (`-inf`, `-1e-3`, `-.5`) is a
    value, not an option: `-p lr -inf` gives `lr` the value -inf (which validation then refuses)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d|\.\d|\.?inf(inity)?$|\.?nan$)", re.IGNORECASE)

    def error(self, message):
        message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)  # one line, whatever was typed
        self.exit(2, f"nbdemo: {message} (see `nbdemo {self.prog.split()[-1]} --help`)\n"
                  if " " in self.prog else f"nbdemo: {message} (see `nbdemo --help`)\n")


class Damaged(Exception):
    """Damaged results files (`store.StoreError`s), reported after the output that could be made without them."""


def known_claim(name):
    """A claim argument, as its `Claim`: refused in one line, with the closest known claim, when it is not one."""
    key = name.upper()
    if key in CLAIMS:
        return CLAIMS[key]
    close = difflib.get_close_matches(key, CLAIMS, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise argparse.ArgumentTypeError(f"unknown claim {name!r}; {hint}the claims are {', '.join(CLAIMS)}")


def known_profile(name):
    """A profile argument of a command over all claims: it must exist for at least one claim."""
    if name == "default" or any(name in params.profiles(c) for c in CLAIMS.values()):
        return name
    names = sorted({p for c in CLAIMS.values() for p in params.profiles(c)})
    raise argparse.ArgumentTypeError(f"unknown profile {name!r}; the profiles are {', '.join(names)}")


def _device(name):
    """bench's --device, checked before anything is timed (and before torch is imported)."""
    test, allowed = params.RULES["device"]
    if not test(name):
        raise argparse.ArgumentTypeError(f"{params.short(name)} is not {allowed}")
    try:
        devices.check_device(name)
    except params.ParameterError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return name


def at_least_1(text):
    """An integer argument >= 1 (--workers, --repeats), in ASCII digits."""
    if not re.fullmatch(r"[1-9][0-9]{0,8}", text, re.ASCII):
        raise argparse.ArgumentTypeError(f"{text} is not an integer >= 1")
    return int(text)


def _overrides(pairs):
    return {name: value for name, value in pairs or []}


def interval(s):
    """"0.38-0.96": the 95% interval of the share of seeds that reproduce."""
    return f"{s['low']:.2f}-{s['high']:.2f}"


def robustness(s):
    """"robust", "depends on: ROW (A: HEADLINE; ...)", or "no alternatives" (none declared)."""
    if s["robust"] is None:
        return "no alternatives"
    return "robust" if s["robust"] else "depends on: " + "; ".join(
        f"{row} ({', '.join(f'{a}: {h}' for a, h in alts.items())})" for row, alts in s["depends"].items())


def listed(c, s, profile):
    """A claim's line of `nbdemo list` as a mapping (what --json prints)."""
    found = runner.latest(c, profile) if profile in params.profiles(c) else None
    line = {"claim": c.id, "title": c.title, "seed_0_page": found[1]["verdict"]["outcome"]
            if found and found[1]["verdict"] else "stale"}
    if not s:
        return {**line, "headline": "no results"}
    return {**line, "headline": s["headline"], "stale": bool(s["stale"] or s["stale_control"]),
            **{k: s[k] for k in ("k", "n", "inconclusive", "low", "high")},
            "fresh_seeds": s["fresh"]["seeds"], "all_seeds": {k: s["all_seeds"][k] for k in
                                                               ("headline", "k", "n", "inconclusive")},
            "robustness": robustness(s),
            "control": None if not s["declared"] else s["control"]["headline"] if s["control"] else
            "none" if s["declared"]["profile"] is None else "not run",
            "revised": s["history"]["revised"] if s["history"] else None, "median_wall_s": s["wall_s"]}


def cmd_list(args):
    """The claims, one line each (or a JSON list with --json); a claim whose stored file is damaged shows as
    unreadable, and its error follows."""
    lines, damaged = [], []
    for c in CLAIMS.values():
        try:
            lines.append(listed(c, evidence.assess(c, args.profile), args.profile))
        except store.StoreError as e:
            damaged.append(e)
            lines.append({"claim": c.id, "title": c.title, "headline": "unreadable"})
    if args.json:
        print(json.dumps(lines, indent=1, ensure_ascii=False))
    else:
        print(f"{'claim':8} {'title':34} {'headline (fresh seeds)':24} {'k of n':>8} {'incl.':>5} "
              f"{'95% interval':12} {'all seeds':24} {'control':15} {'revised':>7} {'seed-0 page':15} {'runtime':>8}  "
              "alternatives")
        for x in lines:
            if "k" not in x:
                print(f"{x['claim']:8} {x['title'][:34]:34} {x['headline']}")
                continue
            a = x["all_seeds"]
            print(f"{x['claim']:8} {x['title'][:34]:34} {x['headline'] + (' (stale)' if x['stale'] else ''):24} "
                  f"{x['k']} of {x['n']:<3} {x['inconclusive']:>5} {interval(x):12} "
                  f"{a['headline'] + ' ' + str(a['k']) + ' of ' + str(a['n']):24} {x['control'] or '':15} "
                  f"{'' if x['revised'] is None else x['revised']:>7} {x['seed_0_page']:15} "
                  f"{x['median_wall_s']:>6.1f} s  {x['robustness']}")
        print(f"\n{rules.RULE}\nk of n: of the conclusive runs of the fresh seeds; incl.: the inconclusive runs beside "
              "them; revised: revisions after results (`nbdemo history CLAIM`).")
    if damaged:
        raise Damaged(damaged)


def cmd_history(args):
    """Each claim's verdict history (every state its store has held, the revisions declared), or with --backfill,
    the history rebuilt from git and merged into results/history/ (nothing is removed)."""
    for c in args.claims or CLAIMS.values():
        if args.backfill:
            h = history.backfill(c)
            print(f"{c.id:8} {len(h['states'])} states, {len(h['revisions'])} declared revisions in {history.path(c)}")
            continue
        s = evidence.assess(c)
        past = s["history"] if s else evidence.past(c, {})
        print(f"{c.id}: {past['revised']} revisions after results ({past['declared']} declared)")
        for e in past["items"]:
            mark = " [revised after results]" if e["revised"] else ""
            if e.get("revision"):
                print(f"  {e['date']:10}  declared {e['kind']}: {e['what']}{mark}")
            else:
                print(f"  {e['at'][:10]}  {e['commit'] or (e['code'] or '') + ' (not committed)'}  {e['headline']} "
                      f"{e['k']} of {e['n']}{mark}: {'; '.join(evidence.brief(e['changes'])) or 'first stored'}")


def cmd_run(args):
    overrides = _overrides(args.p)
    if args.keep and (args.profile == "default" or args.dry_run):
        raise params.ParameterError("--keep stores the executed notebook of a non-default profile")
    for claim in args.claims:  # every claim's parameters before the first runs
        devices.check_device(params.resolve(claim, args.profile, overrides, args.force)[1].get("device", "auto"))
    for claim in args.claims:
        path, _ = runner.run(claim, args.profile, overrides, commit=args.commit, dry_run=args.dry_run,
                             force=args.force)
        if args.keep:
            kept = store.RESULTS / runner.run_name(args.profile, overrides) / path.name
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, kept)
            print(f"kept for the book: {kept}")


def cmd_sweep(args):
    from nbdemo.runs.sweep import parse_seeds, sweep
    claims = [c for c in CLAIMS.values() if args.profile in params.profiles(c)] if args.all else args.claims
    if args.all and not claims:
        raise params.ParameterError(f"no claim has a profile {args.profile!r}")
    if not claims:
        raise params.ParameterError("name the claims to sweep, or give --all")
    for c in claims:
        if args.profile not in params.profiles(c):
            raise params.ParameterError(f"{c.id} has no profile {args.profile!r}; its profiles are: "
                                        f"{', '.join(params.profiles(c))}")
    overrides = _overrides(args.p)
    if "seed" in overrides:
        raise params.ParameterError("a sweep sets the seed itself: give the seeds with --seeds, not -p seed")
    seeds = parse_seeds(" ".join(args.seeds))
    for c in claims:  # on every path, --stale too: every claim's parameters before any work
        params.resolve(c, args.profile, overrides, args.force)
    if args.stale:
        # the default profile's check covers each claim's control too, which the claim's headline depends on
        profiles = [args.profile] + ([rules.CONTROL] if args.profile == "default" and not overrides else [])
        stale = [(c, p, s) for p in profiles for c in claims if p in params.profiles(c)
                 for s, (_, fresh) in store.status(c, p, overrides).items() if not fresh]
        for c, p, s in stale:
            print(f"{c.id} seed {s}{'' if p == args.profile else f' ({p})'}: stale")
        print(f"{len(stale)} stored runs are stale")
        sys.exit(1 if stale else 0)
    sweep(claims, seeds, args.profile, overrides, scheduler=args.scheduler,
          security=args.security, workers=args.workers, commit=args.commit,
          gpu=args.gpu, force=args.force)
    for c in claims:
        s = evidence.assess(c, args.profile) if not overrides else evidence.summary(c, args.profile, overrides)
        print(f"{c.id:8} {s['headline']:15} {s['k']} of {s['n']} seeds reproduce (95% interval {interval(s)})")


def cmd_book(args):
    for c in CLAIMS.values():  # a damaged store, history or revisions file stops the book before any notebook runs
        for profile in {args.profile, rules.CONTROL}:  # (or the book's code loads)
            store.load(c, profile)
        history.load(c)
        history.pending(c, history.now())
    from nbdemo.book.build import build
    build(args.profile, strict=args.strict)


def cmd_bench(args):
    from nbdemo.bench import main
    args.device = resolve_device(args.device)
    main(args)


def main(argv=None):
    ap = Parser(prog="nbdemo", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser)

    p = sub.add_parser("list", help="the claims: outcome over seeds, the seed-0 page's outcome, runtime")
    p.add_argument("--profile", type=known_profile, default="default")
    p.add_argument("--json", action="store_true", help="a JSON list, one mapping per claim")
    p.set_defaults(func=cmd_list)

    def profile_args(p):
        p.add_argument("--profile", default="default", help="a named profile of nbdemo/profiles/<CLAIM>.yml")
        p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "VALUE"), help="override a parameter")
        p.add_argument("--force", action="store_true", help="run sizes, counts and step counts over their "
                       "bounds too (params.RULES)")

    p = sub.add_parser("history", help="each claim's verdict history; --backfill rebuilds it from git into "
                                       "results/history/")
    p.add_argument("claims", nargs="*", type=known_claim)
    p.add_argument("--backfill", action="store_true", help="add every state and revision that git holds (nothing "
                                                           "is removed)")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("run", help="execute claim notebooks into build/ and print wall time and outcome")
    p.add_argument("claims", nargs="+", type=known_claim)
    profile_args(p)
    p.add_argument("--commit", action="store_true", help="default profile only: write the executed notebook "
                                                         "into notebooks/ (its committed outputs)")
    p.add_argument("--keep", action="store_true", help="non-default profiles: also store the executed notebook "
                                                       "in results/<profile>/, where the book shows it")
    p.add_argument("--dry-run", action="store_true", help="check the profile in shape: random data, two steps")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sweep", help="run claims x seeds on Dask; store each run in results/; rerun only what is "
                                     "missing or stale")
    p.add_argument("claims", nargs="*", type=known_claim)
    p.add_argument("--all", action="store_true", help="every claim")
    p.add_argument("--seeds", nargs="+", default=["0-4"], help="seeds as a list or ranges: 0-4, 0 1 2, 0,3,7 "
                                                                "(at most 1,000 runs of claims x seeds)")
    profile_args(p)
    p.add_argument("--scheduler", help="address of a running Dask scheduler, tcp://HOST:PORT or tls://HOST:PORT "
                                       "(default: a LocalCluster here); one that does not answer within 10 s is "
                                       "refused")
    p.add_argument("--security", metavar="CA,CERT,KEY", help="for a tls:// scheduler: PEM files of the CA's "
                   "certificate, a certificate it signed and its key (default: Dask's config distributed.comm.tls.*)")
    p.add_argument("--workers", type=at_least_1, help="workers of the LocalCluster (default: one per core; "
                                                      "each notebook runs torch on one thread)")
    p.add_argument("--commit", action="store_true", help="the default-profile run of each notebook's own seed "
                                                         "writes notebooks/ (workers must share this checkout)")
    p.add_argument("--gpu", action="store_true", help="each run asks its worker for the resource GPU=1")
    p.add_argument("--stale", action="store_true", help="list the stored runs that are stale; run nothing")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("book", help="run what is stale, write the dashboard and build the HTML book")
    p.add_argument("--profile", type=known_profile, default="default")
    p.add_argument("--strict", action="store_true", help="treat Sphinx warnings as errors")
    p.set_defaults(func=cmd_book)

    p = sub.add_parser("bench", help="measure the speed-ups of the hot paths as side-by-side ratios")
    p.add_argument("--repeats", type=at_least_1, help="alternating repeats per row (default 5; 3 with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="one row of each kind at its small size, fewer repeats: about two minutes")
    p.add_argument("--device", type=_device, default="auto", help="auto (cuda if there is one), cpu, cuda, ...")
    p.add_argument("--book", action="store_true", help="also run every notebook (default profile) and time it")
    p.set_defaults(func=cmd_bench)

    args = ap.parse_args(argv)
    try:
        with runner.sigterm_as_interrupt():
            args.func(args)
    except (params.ParameterError, store.StoreError, runner.NotebookFailed, datacheck.BadData) as e:
        print(f"nbdemo: {e}", file=sys.stderr)
        sys.exit(1 if isinstance(e, runner.NotebookFailed) else 2)
    except Damaged as e:
        print("\n".join(f"nbdemo: {err}" for err in e.args[0]), file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:  # exit 128 + the signal's number, as a shell reports a command it stopped
        print("nbdemo: interrupted; notebooks/ is untouched and no partial result was kept", file=sys.stderr)
        sys.exit(128 + ((e.args or (15,))[0] if isinstance(e, runner.Terminated) else 2))
    except BrokenPipeError:  # `nbdemo list | head`: the reader stopped reading (as the Python docs advise)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as e:  # the machine's, not the input's: a folder that cannot be made, a disk full, no permission
        print(f"nbdemo: {e.filename + ': ' if e.filename else ''}{e.strerror or e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
