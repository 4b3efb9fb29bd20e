"""The integrations Deskhand knows. Specs are cheap; SDKs load only inside their functions."""

from __future__ import annotations

from integrations import caldav, docker, github, kubernetes, slack
from integrations.spec import IntegrationSpec

SPECS: dict[str, IntegrationSpec] = {
    spec.id: spec for spec in (docker.SPEC, kubernetes.SPEC, caldav.SPEC, github.SPEC, slack.SPEC)
}


def spec(integration: str) -> IntegrationSpec | None:
    return SPECS.get(integration)
