-- Issue 39 item 3: cache writes priced. The upstream bills `cache_creation_input_tokens` at the
-- model's `pricing.cache_write` (the input rate when none is published): the catalog keeps that rate
-- (the extended tier's rides in `extended_pricing` as `cacheWriteMicroPerM`), the request record
-- the cache-write tokens it was charged for, and the ending's item carries them to it
-- (svc_end_items, prisma/functions).
ALTER TABLE "catalog_models" ADD COLUMN "cache_write_micro_per_m" BIGINT;
ALTER TABLE "inference_requests" ADD COLUMN "cache_write_tokens" INTEGER;
ALTER TYPE "svc_end_item" ADD ATTRIBUTE "cache_write" INTEGER;
