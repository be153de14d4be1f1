"""Reads the library's NCCL-style log lines and adds up what they report.

    host:pid:tid [dev] NCCL-CAR INFO comm 0x55d0 rank 1/4 setup: eligible (ipc peers, full nvlink, ...)
    host:pid:tid [dev] NCCL-CAR INFO comm 0x55d0 rank 1/4 setup: eligible (ipc peers, pcie (...), ...); pcie tuned: ...
    host:pid:tid [dev] NCCL-CAR INFO comm 0x55d0 rank 1/4 setup: not eligible: <why>
    host:pid:tid [dev] NCCL-CAR INFO comm 0x55d0 rank 1/4 setup: not eligible: pcie untuned (ipc peers, pcie ...
    host:pid:tid [dev] NCCL-CAR INFO comm 0x55d0 rank 1/4 released: taken 1shot=9
        2shot=2 1stage=0 2stage=1 (1052688 bytes) forwarded 4 (op=1 too-large=3)
    host:pid:tid [dev] NCCL-CAR INFO comm 0x55d0 rank 1/4 alive at exit: taken ... forwarded ...
        (never destroyed: its counts when the process exited; summed like released: lines)
    host:pid:tid [dev] file.cc:123 NCCL-CAR WARN <text>
    host:pid:tid [-1] NCCL-CAR INFO real NCCL found as <where>   (first NCCL call of a process)
    host:pid:tid [-1] NCCL-CAR INFO audit: <file> is served by <libnccl-car.so>; ...
    host:pid:tid [dev] NCCL-CAR TRACE rank 1 all-reduce 4096 x bf16 sum (8192 bytes) -> 1shot

The library writes them with one formatter (plugin/log_format.h); the tests read lines it
made (nccl_car_query log-samples). Kernel and reason names are taken from the lines, never
typed here. Every rank logs its own lines, so calls are counted once per rank that made them."""

import re
from collections import Counter
from dataclasses import dataclass

from .tune_table import NVLINK, PCIE
from .units import format_size

# search, not match: launchers may prefix each line ("[1,0]<stderr>:" from mpirun).
_LINE = re.compile(r"(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<device>-?\d+)\] "
                   r"(?:(?P<where>\S+:\d+) )?NCCL-CAR (?P<level>WARN|INFO|TRACE) (?P<text>.*)")
_COMM = re.compile(r"comm (?P<comm>\S+) rank (?P<rank>\d+)/(?P<ranks>\d+) "
                   r"(?P<event>setup|released|alive at exit): (?P<detail>.*)")
# At TRACE, one line per call our kernels take: counts even for communicators never
# released (JAX never destroys its own). Older libraries left the op out.
_TRACED = re.compile(r"rank (?P<rank>\d+) (?P<collective>[a-z-]+) (?P<count>\d+) x (?P<type>\S+)(?: (?P<op>[a-z]+))? "
                     r"\((?P<bytes>\d+) bytes\) -> (?P<kernel>\S+)")
_RELEASED = re.compile(r"taken (?P<kernels>[0-9a-z]+=\d+(?: [0-9a-z]+=\d+)*) \((?P<bytes>\d+) bytes\) "
                       r"forwarded (?P<forwarded>\d+)(?: \((?P<reasons>[^)]*)\))?")
_REASON = re.compile(r"([A-Za-z0-9-]+)=(\d+)")
# The links a setup: line names: an eligible communicator's (the NVLink case or the PCIe case),
# or a PCIe communicator's that no choice table measured, which is not eligible ("not
# eligible: pcie untuned (ipc peers, pcie (...), sm_90): ..."): a PCIe case all the same.
_LINKS = re.compile(r"(?P<untuned>not eligible: pcie untuned|eligible) \([a-z-]+ peers, (?P<links>full nvlink|pcie)\b")

_WARN_EXAMPLES = 5


@dataclass(frozen=True)
class TakenCall:
    """One TRACE line: a call our kernels took. `bytes` is one rank's part for the all-gather
    and the reduce-scatter (NCCL's count), the whole message for the all-reduce."""
    rank: int
    collective: str
    count: int
    type: str
    op: str | None
    bytes: int
    kernel: str

    def message_bytes(self, ranks):
        """The whole message: every rank's part where the line gives one rank's."""
        return self.bytes if self.collective == "all-reduce" else self.bytes * ranks


def taken_calls(text):
    """The TakenCalls of every TRACE line in `text`, in order."""
    calls = []
    for line in text.splitlines():
        match = _LINE.search(line.rstrip("\r"))
        traced = _TRACED.fullmatch(match["text"]) if match and match["level"] == "TRACE" else None
        if traced is not None:
            calls.append(TakenCall(int(traced["rank"]), traced["collective"], int(traced["count"]), traced["type"],
                                   traced["op"], int(traced["bytes"]), traced["kernel"]))
    return calls


class LogTally:
    """Feed it every stderr line (library or not); read the totals or summary()."""

    def __init__(self):
        self.library_lines = 0
        self.processes = set()
        self.setups = 0
        self.communicators = 0          # rank-0 setups: one per communicator
        self.eligible = 0
        self.links = Counter()          # "nvlink" / "pcie" -> communicator ranks whose setup: line names them
        self.pcie_untuned = 0           # PCIe communicator ranks no choice table measured (not eligible)
        self.not_eligible = Counter()   # reason -> ranks
        self.releases = 0
        self.alive_at_exit = 0          # released: lines that came at exit instead (never destroyed)
        self.taken = Counter()          # kernel name ("1shot", ...) -> calls, in the library's order
        self.released = []              # per released: line, its own kernel -> calls
        self.traced = Counter()         # kernel -> calls, from TRACE lines
        self.taken_bytes = 0
        self.forwarded = 0
        self.forward_reasons = Counter()
        self.real_nccl_found = 0        # processes in which an NCCL call reached the library
        self.audit_served = 0           # loads of NCCL the audit module turned to the library
        self.warnings = []              # WARN texts, with their source location
        self.not_understood = []        # setup/released lines in an unknown format
        self._open = set()              # (host, pid, comm, rank) set up, not yet released

    def feed(self, line):
        match = _LINE.search(line.rstrip("\r\n"))
        if match is None:
            return
        self.library_lines += 1
        self.processes.add((match["host"], match["pid"]))
        if match["level"] == "WARN":
            where = f"{match['where']}: " if match["where"] else ""
            self.warnings.append(where + match["text"])
            return
        if match["text"].startswith("real NCCL found as "):
            self.real_nccl_found += 1
        elif match["text"].startswith("audit: ") and " is served by " in match["text"]:
            self.audit_served += 1
        traced = _TRACED.fullmatch(match["text"]) if match["level"] == "TRACE" else None
        if traced is not None:
            self.traced[traced["kernel"]] += 1
            return
        comm = _COMM.fullmatch(match["text"])
        if comm is None:
            return  # other INFO/TRACE lines carry nothing the summary counts
        key = (match["host"], match["pid"], comm["comm"], comm["rank"])
        if comm["event"] == "setup":
            self._feed_setup(key, comm, line)
        else:
            self._feed_released(key, comm["detail"], line, at_exit=comm["event"] == "alive at exit")

    def _feed_setup(self, key, comm, line):
        detail = comm["detail"]
        links = _LINKS.match(detail)
        if links:
            self.links[NVLINK if links["links"] == "full nvlink" else PCIE] += 1
            if links["untuned"] != "eligible":
                self.pcie_untuned += 1
        if detail.startswith("eligible"):
            self.eligible += 1
        elif detail.startswith("not eligible"):
            self.not_eligible[detail[len("not eligible"):].lstrip(": ") or "no reason given"] += 1
        else:
            self.not_understood.append(line.strip())
            return
        self.setups += 1
        if comm["rank"] == "0":
            self.communicators += 1
        self._open.add(key)

    def _feed_released(self, key, detail, line, at_exit):
        released = _RELEASED.fullmatch(detail)
        if released is None:
            self.not_understood.append(line.strip())
            return
        if at_exit:
            self.alive_at_exit += 1
        else:
            self.releases += 1
        self._open.discard(key)
        taken = Counter({kernel: int(count) for kernel, count in _REASON.findall(released["kernels"])})
        self.released.append(taken)
        # Every released: line names every kernel: the first one seen sets the order.
        self.taken.update(taken)
        self.taken_bytes += int(released["bytes"])
        self.forwarded += int(released["forwarded"])
        for reason, count in _REASON.findall(released["reasons"] or ""):
            self.forward_reasons[reason] += int(count)

    @property
    def taken_calls(self):
        return sum(self.taken.values())

    @property
    def never_released(self):
        return len(self._open)

    def summary_lines(self):
        """The run summary, one string per line, without a trailing newline."""
        if self.library_lines == 0:
            return ["nccl-car: no NCCL-CAR line was seen: the library was not loaded, "
                    "or the program made no NCCL calls"]
        # A communicator is counted by its rank 0, so one with rank 0 elsewhere counts 0.
        lines = [f"nccl-car: {len(self.processes)} process(es); {self.communicators} "
                 f"communicator(s), {self.setups} communicator rank(s) set up: "
                 f"{self.eligible} eligible, {sum(self.not_eligible.values())} not eligible"]
        for reason, ranks in self.not_eligible.most_common():
            lines.append(f"  not eligible ({ranks} rank(s)): {reason}")
        per_kernel = ", ".join(f"{kernel} {count}" for kernel, count in self.taken.items())
        lines.append(f"  taken: {self.taken_calls} call(s)" + (f" ({per_kernel})" if per_kernel else "") +
                     f", {format_size(self.taken_bytes)} ({self.taken_bytes} bytes), counted on every rank")
        reasons = ", ".join(f"{reason} {count}" for reason, count in
                            sorted(self.forward_reasons.items(), key=lambda item: (-item[1], item[0])))
        lines.append(f"  forwarded to NCCL: {self.forwarded} call(s)" +
                     (f" ({reasons})" if reasons else ""))
        if self.alive_at_exit:
            lines.append(f"  {self.alive_at_exit} communicator rank(s) alive at exit (never destroyed): "
                         "counted above from their counts at exit")
        if self.setups and self.releases == 0 and self.alive_at_exit == 0:
            lines.append("  no communicator was released: counts come at ncclCommDestroy or at exit, "
                         "which the program did not reach (killed, or _exit)")
        elif self.never_released:
            lines.append(f"  {self.never_released} communicator rank(s) never released nor seen at exit "
                         "(killed, or _exit?): their calls are not counted above")
        lines.append(f"  WARN lines: {len(self.warnings)}")
        lines.extend(f"    {text}" for text in self.warnings[:_WARN_EXAMPLES])
        if len(self.warnings) > _WARN_EXAMPLES:
            lines.append(f"    ... and {len(self.warnings) - _WARN_EXAMPLES} more")
        if self.not_understood:
            lines.append(f"  {len(self.not_understood)} setup/released line(s) not understood "
                         f"(log format changed?), e.g.: {self.not_understood[0]}")
        return lines
