/**
 * A tenant's settings for each secret manager, as an admin sets them (`kiln settings secret-manager set`)
 * and kiln stores them (table `tenant_secret_managers`). They hold where the manager is and how
 * kiln proves who it is; never a credential itself: those come from files (a Kubernetes Secret
 * mounted into kiln's pod) or from the SDK's own default chain (IRSA, workload identity).
 */
export interface VaultSettings {
  /** `https://vault.example.com:8200`. */
  readonly address: string;
  /** Vault Enterprise / HCP namespace, sent as `X-Vault-Namespace`. */
  readonly namespace?: string;
  readonly auth: VaultTokenAuth | VaultKubernetesAuth;
  /** A PEM file of CAs to trust for `address` (a private CA). */
  readonly caFile?: string;
}

export interface VaultTokenAuth {
  readonly method: 'token';
  /** A file holding the token (e.g. a mounted Kubernetes Secret). */
  readonly tokenFile: string;
}

/** Vault's Kubernetes auth method: log in with a service-account JWT for a role. */
export interface VaultKubernetesAuth {
  readonly method: 'kubernetes';
  readonly role: string;
  /** The auth method's mount path; default `kubernetes`. */
  readonly mount?: string;
  /** The JWT file; default the pod's projected service-account token. */
  readonly jwtFile?: string;
}

export const KUBERNETES_SERVICE_ACCOUNT_TOKEN =
  '/var/run/secrets/kubernetes.io/serviceaccount/token';

export interface AwsSecretsManagerSettings {
  readonly region: string;
  /** Another endpoint (a VPC endpoint, LocalStack); default the region's. */
  readonly endpoint?: string;
  /**
   * An AWS shared credentials file (a mounted Secret) and its profile; absent: the SDK's default
   * chain (environment, IRSA web identity, instance metadata).
   */
  readonly credentialsFile?: string;
  readonly profile?: string;
}

export interface AzureKeyVaultSettings {
  /** `https://<vault>.vault.azure.net`. */
  readonly vaultUrl: string;
  /**
   * Workload identity, stated; absent fields come from the environment the AKS webhook sets
   * (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST), and
   * without those DefaultAzureCredential's chain.
   */
  readonly tenantId?: string;
  readonly clientId?: string;
  readonly federatedTokenFile?: string;
  readonly authorityHost?: string;
  /**
   * A PEM file of CAs to trust for the vault and the authority host besides Node's public roots
   * (a TLS-inspecting proxy, a private endpoint behind a private CA). HTTPS_PROXY and NO_PROXY in
   * kiln's environment choose the route, as the Azure SDK reads them.
   */
  readonly caFile?: string;
}

export interface SecretManagerSettingsByType {
  readonly vault: VaultSettings;
  readonly aws_secretsmanager: AwsSecretsManagerSettings;
  readonly azure_keyvault: AzureKeyVaultSettings;
}
