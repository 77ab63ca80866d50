// The app's storage account: the host's state (timers, Durable task hub), the Flex Consumption
// deployment package container, and by default the coordinator's lease, queues, results and job
// index (coordinatorStorage.bicep creates those queues and containers).
// Entra ID only: shared-key access is off, so no account key works and none can leak. The host,
// Durable, the deployment and the app all authenticate with the managed identity.
// Plain resources, no registry module: the properties avm/res/storage/storage-account 0.8.3 sent
// with the parameters main.bicep gave it, its defaults included (infrastructure encryption, which
// cannot change after creation; the blob service's soft-delete policies), so an account it created
// is updated in place with the same values.

@description('Storage account name (3-24 lowercase letters and digits).')
@minLength(3)
@maxLength(24)
param name string

@description('Region of the account.')
param location string

@description('Tags of the account.')
param tags object = {}

// Locally redundant by default: the account holds working state (queues, leases, Durable history)
// whose cost is per transaction; choose a zone- or geo-redundant SKU if jobs must survive a zone loss.
@description('Redundancy of the account.')
@allowed(['Standard_LRS', 'Standard_ZRS', 'Standard_GRS', 'Standard_GZRS'])
param skuName string = 'Standard_LRS'

@description('Container that receives the Flex Consumption deployment package.')
param deploymentContainerName string

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: skuName
  }
  properties: {
    accessTier: 'Hot'
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    defaultToOAuthAuthentication: false
    // As the registry module left it (its default); no object replication policy exists here.
    allowCrossTenantReplication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    dnsEndpointType: 'Standard'
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
    isLocalUserEnabled: false
    isSftpEnabled: false
    largeFileSharesState: skuName == 'Standard_LRS' || skuName == 'Standard_ZRS' ? 'Disabled' : null
    encryption: {
      keySource: 'Microsoft.Storage'
      requireInfrastructureEncryption: true
      services: {
        blob: { enabled: true }
        file: { enabled: true }
        queue: { enabled: true }
        table: { enabled: true }
      }
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storageAccount
  name: 'default'
  properties: {
    // Deleted blobs are kept 7 days and deleted containers for the service's default period.
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      allowPermanentDelete: false
    }
    automaticSnapshotPolicyEnabled: false
    isVersioningEnabled: false
    lastAccessTimeTrackingPolicy: {
      enable: false
    }
    cors: {
      corsRules: []
    }
  }
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

@description('Account name.')
output name string = storageAccount.name
