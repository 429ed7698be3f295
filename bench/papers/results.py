"""Writing one paper's section of bench/RESULTS-papers.md between its markers (each script
owns its section; the rest of the file is kept)."""
import os

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "RESULTS-papers.md")


def write_section(begin, end, lines):
    text = open(RESULTS).read() if os.path.exists(RESULTS) else ""
    section = "\n".join(lines)
    if not section.startswith(begin):
        section = begin + "\n" + section
    if not section.rstrip("\n").endswith(end):
        section = section.rstrip("\n") + "\n" + end
    if begin in text and end in text:
        text = text[:text.index(begin)] + section.rstrip("\n") + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section.rstrip("\n") + "\n"
    open(RESULTS, "w").write(text)
    print(f"wrote {RESULTS}")
