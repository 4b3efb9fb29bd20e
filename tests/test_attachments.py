from __future__ import annotations

import base64

from app.core.attachments import MAX_TEXT_BYTES, build_user_message

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def test_text_and_image_attachments(tmp_path):
    (tmp_path / "notes.txt").write_text("line one\n")
    (tmp_path / "pic.png").write_bytes(PNG)
    msg, problems = build_user_message(
        "look", [str(tmp_path / "notes.txt"), str(tmp_path / "pic.png")]
    )
    assert problems == []
    assert msg.content.startswith("look\n\nAttached file `notes.txt`:\n```\nline one\n")
    assert msg.images == ["data:image/png;base64," + base64.b64encode(PNG).decode()]


def test_problems_are_reported_not_raised(tmp_path):
    (tmp_path / "bin.dat").write_bytes(b"\0\1\2" * 10)
    big = tmp_path / "big.log"
    big.write_text("x" * (MAX_TEXT_BYTES + 10))
    msg, problems = build_user_message(
        "", [str(tmp_path / "bin.dat"), str(tmp_path / "gone.txt"), str(big)]
    )
    assert [p.path.rsplit("/", 1)[-1] for p in problems] == ["bin.dat", "gone.txt"]
    assert "binary" in problems[0].reason
    assert "(first 200 kB)" in msg.content
