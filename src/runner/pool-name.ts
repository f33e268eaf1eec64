/** The one RunnerPool of a deployment (placement is global; shard by region later). */
export const POOL_NAME = "default";
