"""Drives a kbot server through a Python client generated from its own
OpenAPI document (openapi-python-client), as a third party would.

Run by server/tests/it/openapi.rs with the generated package `kbot_client` on
PYTHONPATH:

    openapi_client.py BASE_URL USER_TOKEN ENROLLMENT_TOKEN REPO_PATH JOB_FILE

It registers the repo, submits the job file for the repo's last commit
against its parent, plays the agent (enrol, lease, report progress, upload
results) until the submission settles, then reads the submission and its
results back and checks them against what it uploaded. Everything goes
through the generated client's typed calls and models; a check that fails
raises. On success it prints what it read as one JSON object, which the
Rust test compares with the server's own answers.
"""

import json
import statistics
import sys
import time
from collections import defaultdict

from kbot_client import AuthenticatedClient, Client
from kbot_client.api.agent import (
    enroll_agent,
    lease_job,
    report_job_event,
    upload_job_result,
)
from kbot_client.api.repos import create_repo, resolve_commit
from kbot_client.api.submissions import (
    create_submission,
    get_submission,
    get_submission_results,
)
from kbot_client.models import (
    BootBackend,
    EnrollRequest,
    ErrorBody,
    EventRequest,
    Hardware,
    JobState,
    LeaseRequest,
    RepoCreate,
    ResultUpload,
    ResultUploadMetrics,
    ResultUploadTuning,
    SubmitRequest,
)

KPI = "bw_pipe.bandwidth.MB/sec"
# Head runs are 20% slower than base runs: a clear regression.
BASE_BANDWIDTH = 1000.0
HEAD_BANDWIDTH = 800.0
DEADLINE_SECS = 60


def ok(response, what):
    """The parsed body of a successful call; an ErrorBody or no body fails."""
    parsed = response.parsed
    if response.status_code >= 300 or parsed is None or isinstance(parsed, ErrorBody):
        raise AssertionError(
            f"{what}: HTTP {response.status_code}: {response.content!r}"
        )
    return parsed


def main():
    base_url, user_token, enrollment_token, repo_path, job_path = sys.argv[1:6]
    with open(job_path, encoding="utf-8") as f:
        job_file = f.read()
    anonymous = Client(base_url=base_url, raise_on_unexpected_status=True)
    user = AuthenticatedClient(
        base_url=base_url, token=user_token, raise_on_unexpected_status=True
    )

    repo = ok(
        create_repo.sync_detailed(
            client=user, body=RepoCreate(name="linux", url=repo_path)
        ),
        "create repo",
    )
    assert repo.name == "linux" and repo.default_branch == "main", repo
    head = ok(
        resolve_commit.sync_detailed(client=anonymous, name="linux", rev="main"),
        "resolve main",
    )
    assert len(head.sha) == 40 and len(head.parents) == 1, head

    submitted = ok(
        create_submission.sync_detailed(
            client=user,
            body=SubmitRequest(repo="linux", job_file=job_file, head=head.sha),
        ),
        "submit",
    )
    assert submitted.state == "queued", submitted.state
    assert submitted.head.sha == head.sha, submitted.head
    assert submitted.base.sha == head.parents[0], submitted.base

    enrolled = ok(
        enroll_agent.sync_detailed(
            client=anonymous,
            body=EnrollRequest(
                enrollment_token=enrollment_token,
                name="py-box",
                tbox_group="lkp-test",
                backend=BootBackend.QEMU,
                hardware=Hardware(
                    arch="x86_64",
                    cpu_model="Intel(R) Xeon(R) Platinum 8321HC CPU @ 1.40GHz",
                    sockets=2,
                    cores=8,
                    threads=16,
                    numa_nodes=2,
                    memory_bytes=64 << 30,
                    page_size=4096,
                    microcode="0x700001f",
                    kernel="6.1.0-test",
                ),
            ),
        ),
        "enroll",
    )
    agent = AuthenticatedClient(
        base_url=base_url,
        token=enrolled.agent_token,
        raise_on_unexpected_status=True,
    )

    # What this agent uploaded: (job index, side) -> KPI values.
    uploaded = defaultdict(list)
    deadline = time.monotonic() + DEADLINE_SECS
    while True:
        assert time.monotonic() < deadline, "the submission did not settle in time"
        lease = ok(
            lease_job.sync_detailed(client=agent, body=LeaseRequest(wait_secs=0)),
            "lease",
        )
        job = lease.job
        if job is None:
            detail = ok(
                get_submission.sync_detailed(client=anonymous, id=submitted.id),
                "submission",
            )
            if detail.submission.state not in ("queued", "running"):
                break
            continue
        assert job.submission_id == submitted.id, job.submission_id
        running = report_job_event.sync_detailed(
            client=agent,
            id=job.job_id,
            body=EventRequest(state=JobState.RUNNING, detail="bw_pipe"),
        )
        assert running.status_code == 204, running
        side = "head" if job.commit == head.sha else "base"
        value = (HEAD_BANDWIDTH if side == "head" else BASE_BANDWIDTH) + job.run_index % 3
        metrics = ResultUploadMetrics()
        metrics[KPI] = value
        stored = ok(
            upload_job_result.sync_detailed(
                client=agent,
                id=job.job_id,
                body=ResultUpload(
                    metrics=metrics,
                    raw_output=f"{job.job.options['size']} pipe bandwidth\n",
                    kernel_release="6.1.0-test",
                    tuning=ResultUploadTuning(),
                    started_at=1,
                    finished_at=2,
                ),
            ),
            "upload",
        )
        assert stored.stored, stored
        job_index = job_indices(anonymous, submitted.id)[job.job_id]
        uploaded[(job_index, side)].append(value)

    detail = ok(
        get_submission.sync_detailed(client=anonymous, id=submitted.id), "submission"
    )
    assert detail.submission.state == "done", detail.submission.state
    assert detail.job_file == job_file
    sizes = [a.options["size"] for a in detail.atomic_jobs]
    assert sizes == ["4k", "64k", "1m"], sizes
    assert all(j.state == "finished" for j in detail.jobs), [
        j.state for j in detail.jobs
    ]
    assert detail.submission.jobs.finished == len(detail.jobs) == sum(
        len(v) for v in uploaded.values()
    )

    results = ok(
        get_submission_results.sync_detailed(client=anonymous, id=submitted.id),
        "results",
    )
    assert len(results.runs) == len(detail.jobs), len(results.runs)
    for run in results.runs:
        assert run.metrics[KPI] in uploaded[(run.job_index, run.side)], run
    comparisons = sorted(
        (c for c in results.comparisons if c.metric == KPI), key=lambda c: c.job_index
    )
    assert [c.job_index for c in comparisons] == [0, 1, 2], comparisons
    for c in comparisons:
        base = uploaded[(c.job_index, "base")]
        head_values = uploaded[(c.job_index, "head")]
        assert (c.base_runs, c.head_runs) == (len(base), len(head_values)), c
        assert abs(c.base_mean - statistics.fmean(base)) < 1e-9, c
        assert abs(c.head_mean - statistics.fmean(head_values)) < 1e-9, c
        assert -21.0 < c.change_percent < -19.0, c.change_percent
        assert c.verdict == "different", c.verdict

    json.dump(
        {
            "submission_id": submitted.id,
            "state": detail.submission.state,
            "jobs": len(detail.jobs),
            "comparisons": [
                {
                    "job_index": c.job_index,
                    "verdict": c.verdict,
                    "base_runs": c.base_runs,
                    "head_runs": c.head_runs,
                    "base_mean": c.base_mean,
                    "head_mean": c.head_mean,
                }
                for c in comparisons
            ],
        },
        sys.stdout,
    )


def job_indices(client, submission_id):
    """job id -> atomic job index, from the submission's detail (read per job:
    the comparison adds extra runs as it goes)."""
    detail = ok(
        get_submission.sync_detailed(client=client, id=submission_id), "submission"
    )
    return {j.id: j.job_index for j in detail.jobs}


if __name__ == "__main__":
    main()
