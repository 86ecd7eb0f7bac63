"""``wmrl build-image``: build the DockerSandbox image offline (cached by recipe hash).

Example:
    $ sudo wmrl build-image            # a few minutes the first time, instant after
    $ wmrl build-image --print-tag     # the tag DockerSandbox() uses by default
"""

from __future__ import annotations

import argparse
import sys

from wmrl_env.sandboxes.image import build_image, default_image


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "build-image",
        help="build the Docker sandbox image from a Debian mirror (no image registry)",
        description=(
            "Bootstrap a minimal Debian with Python, numpy, pandas and scikit-learn "
            "(mmdebstrap) and import it into Docker as the DockerSandbox image. The tag is a "
            "hash of the recipe: an image already built is reused. Needs root, mmdebstrap "
            "and a running Docker engine."
        ),
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    parser.add_argument("--mirror", help="Debian mirror (default http://deb.debian.org/debian)")
    parser.add_argument("--print-tag", action="store_true", help="print the tag and exit")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.print_tag:
        print(default_image())
        return 0
    try:
        tag = build_image(force=args.force, mirror=args.mirror)
    except RuntimeError as error:
        print(f"wmrl build-image: {error}", file=sys.stderr)
        return 1
    print(tag)
    return 0
