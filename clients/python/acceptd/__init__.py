"""acceptd: a client of the acceptd daemon, standard library only.

    from acceptd import Client
    job = Client("http://127.0.0.1:8080", "my-key").submit("report.export", {"month": "2026-11"})
    print(job.wait(timeout=60).result())

See README.md beside this package; the wire protocol is docs/protocol.md in the repository."""

from .batches import Batch, Schedules
from .client import TERMINAL, Artifact, Client, Job
from .errors import AcceptdError, DigestMismatch, JobTimeout, ProblemError
from .version import __version__
from .webhooks import WebhookVerificationError, verify_webhook
from .worker import JobContext, PermanentFailure, Worker

__all__ = ["AcceptdError", "Artifact", "Batch", "Client", "DigestMismatch", "Job", "JobContext", "JobTimeout",
           "PermanentFailure", "ProblemError", "Schedules", "TERMINAL", "WebhookVerificationError", "Worker", "__version__",
           "verify_webhook"]
