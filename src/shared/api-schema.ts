/**
 * Request and response bodies of the HTTP interface (spec "Resources and their fields").
 * Requests are strict: unknown fields are `400 invalid_request`. Response types are plain
 * TypeScript: the service builds them, it never parses them.
 */
import { z } from "zod";
import { ID_ANY_CASE_PATTERN } from "./ids.ts";

/** Spec reasoning efforts, lowest first; `""` (or omitted) in a request means `off`. */
export const REASONING_EFFORTS = ["off", "minimal", "low", "medium", "high", "xhigh", "max"] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

export const SESSION_STATUSES = ["idle", "running", "interrupted", "failed", "closed"] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

/** Spec "Model ID: 1 to 256 characters". */
export const MAX_MODEL_CHARS = 256;

const jsonSchemaValue = z.record(z.string(), z.unknown());

export const ToolSchema = z.strictObject({
  name: z.string().min(1),
  description: z.string().min(1),
  input_schema: jsonSchemaValue,
  output_schema: jsonSchemaValue.optional(),
});
export type Tool = z.infer<typeof ToolSchema>;

export const ToolBindingSchema = z.strictObject({
  alias: z.string().min(1).max(64),
  executor: z.string().regex(ID_ANY_CASE_PATTERN, "must be a 32-hex executor id").optional(),
  operations: z.array(z.string().min(1)).optional(),
  parameters: z.unknown().optional(),
  provider: z.string().min(1).optional(),
  runtime: z.array(ToolSchema).optional(),
});
export type ToolBinding = z.infer<typeof ToolBindingSchema>;

export const SessionConfigSchema = z.strictObject({
  model: z.string().min(1).max(MAX_MODEL_CHARS),
  tools: z.array(z.string()),
  instructions: z.string().optional(),
  reasoning_effort: z.union([z.enum(REASONING_EFFORTS), z.literal("")]).optional(),
  bindings: z.array(ToolBindingSchema).optional(),
});
export type SessionConfig = z.infer<typeof SessionConfigSchema>;

export const CredentialInputSchema = z.strictObject({
  binding: z.string().min(1),
  value: z.unknown(),
});

export const CreateSessionSchema = z.strictObject({
  harness: z.string(),
  config: SessionConfigSchema,
  credentials: z.array(CredentialInputSchema).optional(),
});
export type CreateSession = z.infer<typeof CreateSessionSchema>;

export const InputSchema = z.strictObject({
  type: z.enum(["user.message", "user.interrupt"]),
  text: z.string().optional(),
  key: z.string().min(1).max(256).optional(),
  delivery: z.string().optional(),
});
export type Input = z.infer<typeof InputSchema>;

/** Resume and flush take an empty body or `{}` (docs/api.md). */
export const EmptySchema = z.strictObject({});

export const RestoreSchema = z.strictObject({ checkpoint: z.string() });

export type Checkpoint = { id: string; offset: number; time: string };

export type Session = {
  id: string;
  harness: string;
  config: SessionConfig;
  status: SessionStatus;
  created_at: string;
  updated_at: string;
  descriptors: Tool[];
  checkpoint?: Checkpoint;
  credential_bindings?: string[];
};

export type Event = {
  id: string;
  type: string;
  time: string;
  data: Record<string, unknown>;
  input_id?: string;
  cursor?: string;
};

export type EventList = { events: Event[]; next_cursor: string };
export type Status = { status: string };
