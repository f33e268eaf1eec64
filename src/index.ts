export default {
  async fetch(): Promise<Response> {
    return new Response("ok");
  },
};
import { DurableObject } from "cloudflare:workers";
export class SessionObject extends DurableObject {}
export class TenantObject extends DurableObject {}
export class RunnerPool extends DurableObject {}
