export * from "./instance.ts";
export * from "./users.ts";
export * from "./oidc.ts";
export * from "./projects.ts";
export * from "./runners.ts";
export * from "./builds.ts";
export * from "./artifacts.ts";
export * from "./hooks.ts";
