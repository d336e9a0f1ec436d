-- Issue 40: Anthropic's Messages API (`POST /v1/messages`) is a route of its own on the inference
-- pipeline; its requests are recorded with route `messages`. Enum values are appended (the order of
-- the others does not change); nothing in this migration uses the new value.
ALTER TYPE "inference_route" ADD VALUE IF NOT EXISTS 'messages' AFTER 'responses';
