"""Streamed, size-capped PDF downloads."""

from __future__ import annotations

import time

import httpx

from revbench.clients.bounded import read_httpx
from revbench.health import Probe, ProbeContext, http_client, ms, read, unreachable
from revbench.retry import Breaker, PermanentError, ResponseTooLarge, TransientError, call_with_retries, classify_status
from revbench.settings import HttpSettings, PdfSettings

PDF_MAGIC = b"%PDF-"
EOF_MARK = b"%%EOF"


def check_pdf(data: bytes) -> None:
    """Raise unless ``data`` starts like a PDF and ends with an end-of-file marker."""
    if not data.startswith(PDF_MAGIC):
        raise PermanentError("body is not a PDF", kind="pdf_not_pdf")
    if EOF_MARK not in data[-2048:]:
        # The whole declared body arrived (a cut transfer raises in httpx), so the file itself
        # is truncated at the source: retrying cannot fix it.
        raise PermanentError(f"PDF truncated at {len(data)} bytes (no %%EOF)", kind="pdf_truncated")


class PdfClient:
    """Fetches ``{base_url}/pdf/{id}v{version}``."""

    def __init__(self, settings: PdfSettings, http: HttpSettings, client: httpx.Client | None = None):
        self.settings = settings
        self.http = http
        self._client = client or httpx.Client(
            timeout=http.timeout_seconds, headers={"user-agent": http.user_agent}, follow_redirects=True
        )
        self.requests_made = 0
        self.breaker = Breaker("arXiv PDFs", settings.base_url, http.breaker_failures)

    def url(self, arxiv_id: str, version: int) -> str:
        return f"{self.settings.base_url.rstrip('/')}/pdf/{arxiv_id}v{version}"

    def _once(self, url: str) -> bytes:
        self.requests_made += 1
        try:
            with self._client.stream("GET", url) as resp:
                if resp.status_code == 404:
                    raise PermanentError(f"PDF not found: {url}", kind="pdf_unavailable")
                classify_status(resp.status_code, resp.headers, "PDF")
                data = read_httpx(resp, self.settings.max_bytes, "arXiv PDFs")
        except ResponseTooLarge as exc:
            # A PDF over the cap is the paper's own (it will be as large next run): final.
            raise PermanentError(str(exc), kind="pdf_too_large") from None
        except httpx.TimeoutException as exc:
            raise TransientError(f"PDF timeout: {exc}", kind="timeout") from exc
        except (httpx.TransportError, httpx.RemoteProtocolError) as exc:
            raise TransientError(f"PDF transfer failed: {exc}", kind="transport") from exc
        check_pdf(data)
        return data

    def fetch(self, arxiv_id: str, version: int) -> bytes:
        """The PDF bytes of one version; raises PermanentError/TransientError with a ``kind``."""
        url = self.url(arxiv_id, version)
        return call_with_retries(lambda: self._once(url), self.http, f"PDF {arxiv_id}v{version}", breaker=self.breaker)

    def close(self) -> None:
        self._client.close()


# What `revbench doctor` asks this service (registered in revbench/services.py).

PDF_PROBE = "1706.03762v1"
"""The PDF whose headers the PDF probe asks for (the S2 probe's paper; the body is not fetched)."""


def probe_pdf(ctx: ProbeContext) -> Probe:
    """``HEAD /pdf/{PDF_PROBE}`` where the extraction downloads PDFs: any HTTP answer is the host
    answering (as the run's own check before extraction); a PDF there is the full answer."""
    settings, clock = ctx.settings, ctx.clock
    base = settings.pdf.base_url.rstrip("/")
    try:
        with http_client(settings, clock) as client:
            t0 = time.monotonic()
            resp = read(client, "HEAD", f"{base}/pdf/{PDF_PROBE}", f"/pdf/{PDF_PROBE}", timeout=clock.left())
            latency = ms(t0)
    except httpx.HTTPError as exc:
        return unreachable("pdf", base, exc, clock, "REVBENCH_PDF__BASE_URL")
    kind = resp.headers.get("content-type", "").split(";")[0].strip()
    if resp.status_code == 200 and kind == "application/pdf":
        return Probe("pdf", base, "ok", f"a PDF answers at /pdf/{PDF_PROBE}", latency)
    if resp.status_code >= 500:
        return Probe("pdf", base, "warn", f"answers, but /pdf/{PDF_PROBE} answered HTTP {resp.status_code}", latency,
                     fix="check REVBENCH_PDF__BASE_URL (https://arxiv.org) and that the host serves PDFs")
    return Probe("pdf", base, "ok", f"answers (HTTP {resp.status_code} {kind or 'without a type'} for "
                 f"/pdf/{PDF_PROBE}, a paper it need not hold)", latency)
