"""doctor's verdict: which communicators the GPUs here could form, and what the library's
own policy (plugin/policy.cc, asked through the query program) does with the all-reduces of
each. The tool only finds groups of GPUs; which calls are taken, by which kernel, and why
the others are not, is the library's answer."""

import itertools

from .library_query import QueryUnavailable
from .units import format_size

SAMPLE_TYPE = "bf16"
SMALLEST_SAMPLE = 16


def _connected(matrix, group):
    return all(matrix[i][j] and matrix[j][i] for i, j in itertools.combinations(group, 2))


def _first_group(matrix, n, size):
    return next((list(group) for group in itertools.combinations(range(n), size)
                 if _connected(matrix, group)), None)


def _compute_capability(gpus, group):
    """major * 10 + minor when every GPU of the group has the same, else 0 (as the handshake)."""
    found = {gpus["gpus"][i]["compute_capability"] for i in group}
    if len(found) != 1:
        return 0
    major, _, minor = found.pop().partition(".")
    return int(major) * 10 + int(minor or 0)


def candidate_communicators(gpus, max_ranks):
    """For each world size from 2 to one past the library's limit: a group of GPUs with P2P
    between every pair (a rank maps its peers' buffers through it), NVLink between every
    pair if there is such a group."""
    n = len(gpus["gpus"])
    p2p, nvlink = gpus["p2p"], gpus["nvlink"]
    linked = [[p2p[i][j] and nvlink is not None and nvlink[i][j] for j in range(n)] for i in range(n)]
    found = []
    for size in range(2, min(n, max_ranks + 1) + 1):
        group = _first_group(linked, n, size)
        full = group is not None
        group = group or _first_group(p2p, n, size)
        if group is None:
            break  # no group of this size, so none larger either
        found.append({"ranks": size, "gpus": group, "full_nvlink": full,
                      "compute_capability": _compute_capability(gpus, group)})
    return found


def sample_sizes(max_bytes):
    """16 bytes, doubling, up to NCCL_CAR_MAX_BYTES (which is included)."""
    sizes = []
    size = SMALLEST_SAMPLE
    while size < max_bytes:
        sizes.append(size)
        size *= 2
    return sizes + [max_bytes]


def _links(gpus):
    n = len(gpus["gpus"])
    p2p, nvlink = gpus["p2p"], gpus["nvlink"]
    pairs = list(itertools.combinations(range(n), 2))
    all_p2p = _connected(p2p, range(n))
    if nvlink is not None:
        if all_p2p and _connected(nvlink, range(n)):
            return "full NVLink"
        if any(nvlink[i][j] and nvlink[j][i] and p2p[i][j] and p2p[j][i] for i, j in pairs):
            return "NVLink between some of them"
    if all_p2p:
        return "NVLink unknown" if nvlink is None else "P2P without full NVLink"
    return "P2P between some pairs only"


def _outcome(decision):
    return decision["algorithm"] if decision["ours"] else f"NCCL ({decision['reason']})"


def ranges_text(decisions):
    """"1shot 16 B..256 KiB, 2shot 512 KiB..8 MiB": runs of equal outcome over the samples."""
    runs = []
    for decision in decisions:
        if runs and runs[-1][0] == _outcome(decision):
            runs[-1][2] = decision["bytes"]
        else:
            runs.append([_outcome(decision), decision["bytes"], decision["bytes"]])
    return ", ".join(f"{label} {format_size(first)}" + (f"..{format_size(last)}" if last != first else "")
                     for label, first, last in runs)


def communicator_line(candidate):
    links = "NVLink" if candidate["full_nvlink"] else "P2P, no NVLink"
    cc = candidate["compute_capability"]
    gpu = f"sm_{cc}" if cc else "mixed GPUs"
    return (f"    {candidate['ranks']} ranks on GPUs {','.join(map(str, candidate['gpus']))} "
            f"({links}, {gpu}): {ranges_text(candidate['decisions'])}")


def _taken(candidate):
    return any(decision["ours"] for decision in candidate["decisions"])


def summarise(gpus, candidates):
    """(verdict line, whether any all-reduce would be accelerated) from the library's
    decisions on each candidate communicator."""
    n = len(gpus["gpus"])
    links = _links(gpus)
    taken = [candidate for candidate in candidates if _taken(candidate)]
    if not taken:
        reasons = sorted({d["reason"] for candidate in candidates for d in candidate["decisions"]})
        if reasons == ["disabled"]:
            return "verdict: NCCL_CAR_DISABLE is set: the library would forward every call to NCCL", False
        return (f"verdict: {n} GPUs, {links}: the library would forward every all-reduce to NCCL "
                f"({', '.join(reasons)})"), False
    largest = max(d["bytes"] for candidate in taken for d in candidate["decisions"] if d["ours"])
    ranks = [candidate["ranks"] for candidate in taken]
    most = max(ranks)
    if ranks == list(range(2, most + 1)):
        between = "2 ranks" if most == 2 else f"2..{most} ranks"
    else:
        between = ", ".join(map(str, ranks)) + " ranks"
    forwarded = [candidate["ranks"] for candidate in candidates if not _taken(candidate)]
    if any(size < most for size in forwarded):
        beyond = "; other communicators are forwarded"
    elif forwarded or n > most:
        beyond = f"; communicators of more than {most} ranks are forwarded"
    else:
        beyond = ""
    return (f"verdict: {n} GPUs, {links}: all-reduces up to {format_size(largest)} between {between} "
            f"would be accelerated{beyond}"), True


def judge(gpus, effective, query, env):
    """{"line", "accelerates" (None when not known), "communicators", "note"}: the verdict
    on this machine under `env`'s settings (`effective`, from settings.effective_settings)."""
    result = {"line": None, "accelerates": False, "communicators": [], "note": None}
    n = len(gpus["gpus"])
    if n == 0:
        result["line"] = "verdict: no GPU visible: the library would forward every call to NCCL"
        return result
    if n == 1:
        result["line"] = ("verdict: 1 GPU: communicators here have a single rank, and the library "
                          "forwards those to NCCL")
        return result
    if not effective["checked"]:
        result.update(line=f"verdict: not known: {effective['message']}", accelerates=None)
        return result
    candidates = candidate_communicators(gpus, effective["max_ranks"])
    if not candidates:
        result["line"] = (f"verdict: {n} GPUs without P2P access between them: the library would "
                          "forward every call to NCCL")
        return result
    sizes = sample_sizes(effective["values"]["NCCL_CAR_MAX_BYTES"])
    try:
        for candidate in candidates:
            candidate["decisions"] = query.decide(env, candidate["ranks"], candidate["full_nvlink"],
                                                  candidate["compute_capability"], sizes, SAMPLE_TYPE)
    except QueryUnavailable as error:
        result.update(line=f"verdict: not known: {error}", accelerates=None)
        return result
    result["line"], result["accelerates"] = summarise(gpus, candidates)
    result["communicators"] = candidates
    result["note"] = (f"({SAMPLE_TYPE} sums at doubling sizes, as the library's policy decides them; it "
                      f"only ever takes ncclSum on {', '.join(effective['element_types'])}, with every "
                      "rank on this host)")
    return result
