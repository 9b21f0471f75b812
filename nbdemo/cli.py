"""The `nbdemo` command: list, run, sweep, book, bench."""
import argparse
import os
import sys

from . import resolve_device, runner
from .claims import CLAIMS


def _overrides(pairs):
    return {name: value for name, value in pairs or []}


def _device(name):
    """bench's --device, checked before anything is timed."""
    try:
        return resolve_device(name)
    except (ValueError, RuntimeError) as e:  # no CUDA here, or a name torch does not know
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_list(args):
    print(f"{'claim':8} {'title':48} {'verdict':12} {'runtime':>8}")
    for c in CLAIMS.values():
        if not c.notebook.exists():
            print(f"{c.id:8} {c.title[:48]:48} {'no notebook':12}")
            continue
        found = runner.latest(c.id, args.profile)
        verdict, wall = ("stale", "") if not found else (runner.verdict_text(found[1]["verdict"]),
                                                         f"{found[1]['wall_s']:.1f} s")
        print(f"{c.id:8} {c.title[:48]:48} {verdict:12} {wall:>8}")


def cmd_run(args):
    for claim in args.claims:
        runner.run(claim, args.profile, _overrides(args.p), commit=args.commit, dry_run=args.dry_run)


def cmd_sweep(args):
    from .runner import sweep
    sweep(args.claim, args.seeds, args.profile, _overrides(args.p))


def cmd_book(args):
    from .book import build
    build(args.profile, strict=args.strict)


def cmd_bench(args):
    from .bench import main
    main(args)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="nbdemo", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("list", help="the claims, with the verdict and runtime of their last run")
    p.add_argument("--profile", default="default")
    p.set_defaults(func=cmd_list)

    def params(p):
        p.add_argument("--profile", default="default", help="a named profile of nbdemo/profiles/<CLAIM>.yml")
        p.add_argument("-p", nargs=2, action="append", metavar=("NAME", "VALUE"), help="override a parameter")

    p = sub.add_parser("run", help="execute claim notebooks into build/ and print wall time and verdict")
    p.add_argument("claims", nargs="+")
    params(p)
    p.add_argument("--commit", action="store_true", help="default profile only: write the executed notebook "
                                                         "into notebooks/ (its committed outputs)")
    p.add_argument("--dry-run", action="store_true", help="check the profile in shape: random data, two steps")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sweep", help="run a claim over several seeds and count, per check, the seeds it holds in")
    p.add_argument("claim")
    p.add_argument("--seeds", nargs="+", type=int, required=True)
    params(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("book", help="run what is stale, write the dashboard and build the HTML book")
    p.add_argument("--profile", default="default")
    p.add_argument("--strict", action="store_true", help="treat Sphinx warnings as errors")
    p.set_defaults(func=cmd_book)

    p = sub.add_parser("bench", help="measure the speed-ups of the hot paths as side-by-side ratios")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", type=_device, default="auto", help="auto (cuda if there is one), cpu, cuda, ...")
    p.add_argument("--book", action="store_true", help="also run every notebook (default profile) and time it")
    p.set_defaults(func=cmd_bench)

    args = ap.parse_args(argv)
    try:
        args.func(args)
    except (runner.ParameterError, runner.NotebookFailed) as e:
        sys.exit(f"nbdemo: {e}")
    except KeyboardInterrupt:
        sys.exit("nbdemo: interrupted; notebooks/ is untouched and no partial result was kept")
    except BrokenPipeError:  # `nbdemo list | head`: the reader stopped reading (as the Python docs advise)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)


if __name__ == "__main__":
    main()
