/**
 * The runner link: messages between a runner-host and the Worker's objects, one zod module used by
 * both ends. Control messages travel on the runner-host's socket to RunnerPool.
 */
import { z } from "zod";

/** Protocol version both ends must speak; a mismatch is refused at hello. */
export const RUNNER_PROTOCOL = 1;

/** Path a runner-host dials for its control socket (WebSocket upgrade, runner secret as bearer). */
export const CONTROL_PATH = "/internal/runners/control";

/** Text a runner-host sends as a keepalive; the pool answers it without waking (auto-response). */
export const PING = "ping";
export const PONG = "pong";

export const HelloSchema = z.strictObject({
  type: z.literal("hello"),
  protocol: z.literal(RUNNER_PROTOCOL),
  runner_id: z.string().regex(/^[a-f0-9]{32}$/),
  harnesses: z.array(z.string().min(1).max(64)),
  draining: z.boolean(),
});

export const DrainingSchema = z.strictObject({ type: z.literal("draining") });

export const ControlUpSchema = z.discriminatedUnion("type", [HelloSchema, DrainingSchema]);
export type ControlUp = z.infer<typeof ControlUpSchema>;

export const WelcomeSchema = z.strictObject({ type: z.literal("welcome"), pool: z.string() });
export const ControlDownSchema = z.discriminatedUnion("type", [WelcomeSchema]);
export type ControlDown = z.infer<typeof ControlDownSchema>;
