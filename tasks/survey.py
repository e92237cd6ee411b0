"""Survey invitations and their emails: who is asked, about which papers, with which links.

Pure over frames: the flow reads the round, the opt-outs and earlier contacts from the
warehouse and the survey store, and writes what these functions return.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import formataddr, formatdate
from typing import Any, NamedTuple

import polars as pl

from revbench.schemas.tables import SURVEY_MESSAGES
from revbench.settings import SurveySettings
from revbench.survey.tokens import Claim, LinkSigner
from revbench.templates import bars_scale, read, render, version

TEMPLATE_HTML = "emails/invitation.html.j2"
STYLE = "emails/email.css"
TEMPLATE_TEXT = "emails/invitation.txt.j2"
LEFT_OUT = ("opted_out", "contacted_earlier", "no_email")


def normalise_email(email: str) -> str:
    """The form opt-outs and earlier contacts are matched on."""
    return email.strip().lower()


def new_invitation_id() -> str:
    """An opaque id: nothing in it says who was invited."""
    return "inv_" + secrets.token_hex(10)


def plan_invitations(candidates: pl.DataFrame, existing: pl.DataFrame, opted_out: set[str], contacted: set[str],
                     now: datetime) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The round's invitations (``candidates``: ``author_id, email, name, query_ids, example_paper,
    round, revision``), keeping the ids of invitations made before (a re-run reuses them), and
    the people left out with the reason (opted out, or already emailed in an earlier round)."""
    known = {a: i for a, i in existing.select("author_id", "invitation_id").iter_rows()} if existing.height else {}
    rows, left = [], []
    for c in candidates.iter_rows(named=True):
        email = normalise_email(c["email"] or "")
        reason = "no_email" if not email else "opted_out" if email in opted_out else \
            "contacted_earlier" if email in contacted and c["author_id"] not in known else None
        if reason:
            left.append({"author_id": c["author_id"], "name": c["name"], "reason": reason})
            continue
        rows.append({"invitation_id": known.get(c["author_id"]) or new_invitation_id(), "round": c["round"],
                     "revision": c["revision"], "author_id": c["author_id"], "email": email, "name": c["name"],
                     "paper_ids": list(c["query_ids"]), "example_paper": c["example_paper"], "created_at": now})
    schema = {"author_id": pl.Utf8, "name": pl.Utf8, "reason": pl.Utf8}
    invitations = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    return invitations, pl.DataFrame(left, schema=schema)


def _preview(text: str, limit: int) -> tuple[str, bool]:
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text, False
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",.;:") + " …", True


@dataclass(frozen=True)
class Rendered:
    """One email, ready to store and send."""

    message_id: str
    subject: str
    text: str
    html: str
    headers: dict[str, str]
    template_version: str


def render_message(inv: dict[str, Any], papers: dict[str, dict[str, str]], signer: LinkSigner, survey: SurveySettings,
                   kind: str = "invitation", open_papers: int = 0) -> Rendered:
    """The multipart email of one invitation (or a reminder of it): per paper a preview and five
    one-click rating links, a link to the page, an opt-out link and one-click unsubscribe headers."""
    import css_inline

    base = survey.base_url.rstrip("/")
    iid = inv["invitation_id"]
    scale = bars_scale()
    shown = []
    for pid in inv["paper_ids"]:
        p = papers[pid]
        preview, shortened = _preview(p["abstract"], survey.abstract_preview_chars)
        links = {lvl["rating"]: f"{base}/r/{signer.sign(Claim(iid, 'rate', pid, lvl['rating']))}" for lvl in scale["levels"]}
        shown.append({"paper_id": pid, "title": " ".join(p["title"].split()), "preview": preview, "shortened": shortened,
                      "links": links})
    page_url = f"{base}/i/{signer.sign(Claim(iid, 'page'))}"
    optout_url = f"{base}/u/{signer.sign(Claim(iid, 'optout'))}"
    reply_to = survey.reply_to or survey.sender_email
    subject = ("Reminder: " if kind != "invitation" else "") + survey.subject
    ctx = dict(name=inv["name"], team=survey.team, lab=survey.lab, institution=survey.institution,
               example_paper=inv.get("example_paper") or "your recent work", papers=shown, page_url=page_url,
               optout_url=optout_url, reply_to=reply_to, question=scale["question"], levels=scale["levels"],
               reminder=kind != "invitation", open_papers=open_papers, subject=subject)
    html, v_html = render(TEMPLATE_HTML, **ctx, css=read(STYLE))
    text, v_text = render(TEMPLATE_TEXT, **ctx)
    domain = survey.sender_email.rpartition("@")[2] or "revbench.invalid"
    headers = {
        "List-Unsubscribe": f"<{optout_url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        "Reply-To": reply_to,
    }
    return Rendered(f"<{iid}.{kind}@{domain}>", subject, text,
                    css_inline.inline(html), headers, f"html {v_html}, css {version(STYLE)}, text {v_text}, scale {scale['version']}")


def email_message(row: dict[str, Any], survey: SurveySettings) -> EmailMessage:
    """A stored message (``survey_messages`` row with its ``headers``) as a MIME message:
    multipart/alternative, plain text first."""
    msg = EmailMessage()
    msg["From"] = formataddr((survey.sender_name, survey.sender_email))
    msg["To"] = row["to_email"]
    msg["Subject"] = row["subject"]
    msg["Message-ID"] = row["message_id"]
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    for k, v in json.loads(row["headers"]).items():
        msg[k] = v
    msg.set_content(row["text"])
    msg.add_alternative(row["html"], subtype="html")
    return msg


def unconfirmed_rows(messages: pl.DataFrame) -> list[dict[str, Any]]:
    """Unconfirmed messages (``Warehouse.survey.unconfirmed_messages``) as the curator reads them: id,
    recipient, since when, the server and why, every value a string."""
    return [{"message": r["message_id"], "to": r["to_email"], "kind": r["kind"], "round": str(r["round"]),
             "since": r["unconfirmed_at"].isoformat(timespec="seconds") if r["unconfirmed_at"] else "",
             "server": r["smtp_server"] or "", "why": r["smtp_reply"] or ""} for r in messages.iter_rows(named=True)]


def new_opt_outs(invitations: pl.DataFrame, opted_out_ids: Iterable[str], have: set[str], now: datetime) -> pl.DataFrame:
    """Opt-outs the survey store recorded (``opted_out_ids``, by invitation) as ``survey_opt_outs``
    rows for addresses not already in ``have``: the warehouse keeps each as first recorded."""
    emails = dict(invitations.select("invitation_id", "email").iter_rows()) if invitations.height else {}
    rows = [{"email": emails[i], "invitation_id": i, "source": "survey", "opted_out_at": now}
            for i in opted_out_ids if i in emails and emails[i] not in have]
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema={"email": pl.Utf8, "invitation_id": pl.Utf8,
                                                                 "source": pl.Utf8, "opted_out_at": pl.Datetime("us", "UTC")})


class ToRender(NamedTuple):
    """One message to render: the invitation (a ``survey_invitations`` row), the kind
    (``invitation`` or ``reminder-<n>``) and, for a reminder, how many papers are still open."""

    invitation: dict[str, Any]
    kind: str
    open_papers: int = 0


def message_rows(todo: list[ToRender], papers: dict[str, dict[str, str]], signer: LinkSigner, survey: SurveySettings,
                 run_id: str, now: datetime) -> pl.DataFrame:
    """The ``survey_messages`` rows of ``todo``, rendered and waiting to be sent."""
    rows = []
    for inv, kind, open_papers in todo:
        m = render_message(inv, papers, signer, survey, kind, open_papers)
        rows.append({"message_id": m.message_id, "invitation_id": inv["invitation_id"], "kind": kind, "round": inv["round"],
                     "to_email": inv["email"], "subject": m.subject, "text": m.text, "html": m.html,
                     "headers": json.dumps(m.headers), "template_version": m.template_version, "state": "rendered",
                     "attempts": 0, "rendered_at": now, "run_id": run_id})
    return pl.DataFrame(rows) if rows else SURVEY_MESSAGES.empty()


@dataclass(frozen=True)
class Reminders:
    """Who gets a reminder now, and how many invitees answered every paper."""

    due: list[ToRender]
    finished: int


def due_reminders(invitations: pl.DataFrame, messages: pl.DataFrame, answered: dict[str, dict[str, Any]],
                  opted_out: set[str], due_before: datetime, most: int) -> Reminders:
    """A reminder for each invitee whose invitation was sent, who has not opted out, has papers
    unanswered (``answered``: invitation -> paper -> answer), had fewer than ``most`` reminders,
    and was last emailed before ``due_before``."""
    due, finished = [], 0
    for inv in invitations.iter_rows(named=True):
        mine = messages.filter(pl.col("invitation_id") == inv["invitation_id"])
        sent = mine.filter(pl.col("state") == "sent")
        if sent.filter(pl.col("kind") == "invitation").height == 0 or inv["email"] in opted_out:
            continue
        open_papers = [p for p in inv["paper_ids"] if p not in answered.get(inv["invitation_id"], {})]
        if not open_papers:
            finished += 1
            continue
        reminders = mine.filter(pl.col("kind").str.starts_with("reminder")).height
        if reminders >= most or sent["sent_at"].max() > due_before:
            continue
        due.append(ToRender(inv, f"reminder-{reminders + 1}", len(open_papers)))
    return Reminders(due, finished)


def pending_messages(messages: pl.DataFrame, kind: str, opted_out: set[str]) -> pl.DataFrame:
    """The wave's messages still to send (``kind``: ``invitation`` or ``reminder``), none to an
    address that opted out, in Message-ID order."""
    wave = messages.filter(pl.col("kind") == "invitation") if kind == "invitation" else \
        messages.filter(pl.col("kind").str.starts_with("reminder"))
    return wave.filter((pl.col("state") == "rendered") & ~pl.col("to_email").is_in(list(opted_out))).sort("message_id")


def recipient_rows(pending: pl.DataFrame) -> list[dict[str, Any]]:
    """The curator's list of a wave's recipients: address, papers asked about (one top-rating link
    each in the plain text), message, state."""
    return [{"to": r["to_email"], "papers": r["text"].count(" 5 (Top Expert): "), "message": r["message_id"],
             "state": r["state"]} for r in pending.iter_rows(named=True)]
