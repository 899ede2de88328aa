"""Prints constraints.txt from the packages of the running environment (run it with a fresh `make install`ed
.venv/bin/python): every installed distribution at its exact version, except torch and the packages torch
itself requires (the Makefile chooses torch, and a newer CUDA torch must be free to bring its own)."""

import importlib.metadata as metadata
import re


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def torch_closure() -> set[str]:
    seen, todo = set(), ["torch"]
    while todo:
        name = todo.pop()
        if _key(name) in seen:
            continue
        seen.add(_key(name))
        for requirement in metadata.requires(name) or []:
            if "extra ==" not in requirement:
                todo.append(re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0])
    return seen


def main() -> None:
    skip = torch_closure() | {"deep-rl-zoo"}
    print(open(__file__.replace("freeze_constraints.py", "constraints_header.txt")).read(), end="")
    pins = {_key(d.metadata["Name"]): f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions()}
    for key in sorted(pins):
        if key not in skip:
            print(pins[key])


if __name__ == "__main__":
    main()
