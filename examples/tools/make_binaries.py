"""Generate the PDF and DOCX examples (deterministic output). Run from the repository root:

    python examples/tools/make_binaries.py
"""

from __future__ import annotations

import datetime
from pathlib import Path

KB = Path(__file__).resolve().parent.parent / "kb"

OVERVIEW = [
    ("h1", "MBT Systems Overview"),
    ("p", "Maintained by Platform Ops. This overview shows how the rider-facing systems fit together."),
    ("h2", "1. Rider systems"),
    ("p", "Riders plan journeys with the Trip Planner and pay with a card or a phone at a validator. Every tap becomes "
          "a tap event on Tidewater, the message broker, and the Fare Engine prices it."),
    ("p", "The Fare Engine writes each charge to the Ledger Store. Coinlane, the payment provider, settles the money "
          "every night."),
    ("h2", "2. Fleet systems"),
    ("p", "The Vehicle Locator Service tracks every vehicle and publishes positions on Tidewater. Signal Bridge uses "
          "those positions to ask traffic lights for priority."),
    ("h2", "3. Platform"),
    ("p", "Platform Ops runs Tidewater, Beacon and Dockhand in the Quayside data centre, with a standby in Hillcrest."),
    ("p", "Step 1: A rider taps a card on a validator."),
    ("p", "Step 2: The Fare Engine prices the tap and writes the charge to the Ledger Store."),
    ("p", "Step 3: Coinlane settles the charges overnight."),
]


def make_pdf(path: Path) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    styles = getSampleStyleSheet()

    def running(canvas, doc):
        canvas.saveState()
        canvas.setFont("Helvetica", 8)
        canvas.drawString(40, A4[1] - 30, "MBT internal - uncontrolled when printed")
        canvas.drawString(40, 20, f"Page {doc.page}")
        canvas.restoreState()

    story = []
    for i, (kind, text) in enumerate(OVERVIEW):
        style = {"h1": styles["Title"], "h2": styles["Heading2"], "p": styles["BodyText"]}[kind]
        story.append(Paragraph(text, style))
        if kind == "h2" and text.startswith("3."):
            story.insert(len(story) - 1, PageBreak())
    doc = SimpleDocTemplate(str(path), pagesize=A4, invariant=1, title="MBT Systems Overview", author="Platform Ops")
    doc.build(story, onFirstPage=running, onLaterPages=running)


def make_docx(path: Path) -> None:
    import docx

    d = docx.Document()
    d.core_properties.created = datetime.datetime(2025, 3, 20)
    d.core_properties.modified = datetime.datetime(2025, 3, 20)
    d.core_properties.author = "Fleet Operations"
    section = d.sections[0]
    section.header.paragraphs[0].text = "INTERNAL - Marrow Bay Transit"
    section.footer.paragraphs[0].text = "Printed copies are uncontrolled."
    d.add_heading("Operations review: March 2025", level=1)
    d.add_paragraph("Chair: Dmitri Hale. Attendees: Ines Okafor, Wren Castellano, Tobias Greer.")
    d.add_heading("1. Ghost buses", level=2)
    d.add_paragraph("Dmitri reported 41 ghost buses in February, most on route 12. The Vehicle Locator Service keeps a "
                    "vehicle's last position for too long after its modem restarts. The fix ships in VLS v4.2.0.")
    d.add_heading("2. Signal Bridge outage", level=2)
    d.add_paragraph("Tobias described the outage of 14 March: Signal Bridge stopped sending priority requests when the "
                    "Junction Control API rejected its key. Platform Ops rotated the key in Strongroom.")
    d.add_heading("Actions", level=2)
    table = d.add_table(rows=1, cols=3)
    for cell, text in zip(table.rows[0].cells, ("Action", "Owner", "Due")):
        cell.text = text
    for row in (("Ship VLS v4.2.0", "Fleet Operations", "2025-04-15"), ("Alert on Junction Control API errors", "Platform Ops", "2025-04-01")):
        cells = table.add_row().cells
        for cell, text in zip(cells, row):
            cell.text = text
    d.save(str(path))


if __name__ == "__main__":
    make_pdf(KB / "architecture" / "overview.pdf")
    make_docx(KB / "meetings" / "2025-03-ops-review.docx")
    print("wrote", KB / "architecture" / "overview.pdf", KB / "meetings" / "2025-03-ops-review.docx")
