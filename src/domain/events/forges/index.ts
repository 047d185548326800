import type { ForgeProvider } from "../../../db/schema/constants.ts";
import { bitbucketAdapter } from "./bitbucket.ts";
import { forgejoAdapter, giteaAdapter } from "./gitea.ts";
import { githubAdapter } from "./github.ts";
import { gitlabAdapter } from "./gitlab.ts";
import type { ForgeAdapter } from "./types.ts";

export const FORGE_ADAPTERS: Record<ForgeProvider, ForgeAdapter> = {
  github: githubAdapter,
  gitlab: gitlabAdapter,
  gitea: giteaAdapter,
  forgejo: forgejoAdapter,
  bitbucket: bitbucketAdapter,
};

export type { ForgeAdapter, ForgeRequest, ParsedDelivery, RepoInfo } from "./types.ts";
