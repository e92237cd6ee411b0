"""Streamed, size-capped PDF downloads."""

from __future__ import annotations

import httpx

from revbench.clients.bounded import read_httpx
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
