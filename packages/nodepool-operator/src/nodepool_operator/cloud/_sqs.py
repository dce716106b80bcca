"""The interruption queue: an SQS queue EventBridge rules feed (config/interruption/), read
with long polls through aiobotocore.

Three calls, the ones config/iam's policy grants on the queue's ARN: GetQueueUrl once when
opened, ReceiveMessage (up to 10 messages, waiting up to 20 s for one: SQS's long poll, so an
idle queue costs three calls a minute) and DeleteMessage once a message has been acted on. A
message not deleted comes back after the queue's visibility timeout, which is how a crash
between reading and acting loses nothing. Errors are the port's (:func:`._aws_errors.translate`).
"""

from __future__ import annotations

import builtins
import contextlib
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

from ._aws import _chain_region, aws_config, aws_session
from ._aws_errors import translate

if TYPE_CHECKING:
    from types_aiobotocore_sqs import SQSClient

__all__ = ["LONG_POLL_SECONDS", "QueueMessage", "SqsQueue"]

#: SQS's longest wait for a message in one ReceiveMessage.
LONG_POLL_SECONDS: Final = 20
_BATCH: Final = 10


@dataclass(frozen=True, slots=True)
class QueueMessage:
    id: str
    receipt: str
    """What DeleteMessage needs (this receipt of the message)."""
    body: str


class SqsQueue:
    """``async with SqsQueue(name, ...) as queue``: the queue ``name`` (its URL looked up
    once); the client's connections close on exit.

    Args:
        name: the queue's name (not its URL).
        region, profile, endpoint_url: as :class:`~._aws.AwsCloud`'s (moto's server in tests).
        wait_seconds: the long poll's wait (at most :data:`LONG_POLL_SECONDS`).
    """

    def __init__(
        self,
        name: str,
        *,
        region: str | None = None,
        profile: str | None = None,
        endpoint_url: str | None = None,
        wait_seconds: int = LONG_POLL_SECONDS,
    ) -> None:
        self.name = name
        self._session = aws_session(profile)
        self._region = region or _chain_region(self._session)
        self._endpoint_url = endpoint_url
        self._wait = max(0, min(wait_seconds, LONG_POLL_SECONDS))
        self._stack = contextlib.AsyncExitStack()
        self._client: SQSClient | None = None
        self.url = ""

    async def __aenter__(self) -> Self:
        # a read longer than the long poll, so the wait itself never times out
        config = aws_config(read_timeout=self._wait + 30)
        try:
            self._client = await self._stack.enter_async_context(
                self._session.create_client(
                    "sqs", region_name=self._region, endpoint_url=self._endpoint_url, config=config
                )
            )
            try:
                reply = await self._client.get_queue_url(QueueName=self.name)
            except Exception as err:
                raise translate(err, operation=f"sqs:GetQueueUrl {self.name}") from err
            self.url = reply["QueueUrl"]
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._client = None
        await self._stack.aclose()

    @property
    def client(self) -> SQSClient:
        if self._client is None:
            raise RuntimeError("SqsQueue is used outside `async with`")
        return self._client

    async def receive(self) -> builtins.list[QueueMessage]:
        """The next messages (none after the long poll's wait on an idle queue)."""
        try:
            reply = await self.client.receive_message(
                QueueUrl=self.url, MaxNumberOfMessages=_BATCH, WaitTimeSeconds=self._wait
            )
        except Exception as err:
            raise translate(err, operation=f"sqs:ReceiveMessage {self.name}") from err
        return [
            QueueMessage(str(m.get("MessageId", "")), m["ReceiptHandle"], str(m.get("Body", "")))
            for m in reply.get("Messages", [])
            if "ReceiptHandle" in m
        ]

    async def delete(self, message: QueueMessage) -> None:
        try:
            await self.client.delete_message(QueueUrl=self.url, ReceiptHandle=message.receipt)
        except Exception as err:
            raise translate(err, operation=f"sqs:DeleteMessage {self.name}") from err
