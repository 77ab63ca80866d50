// The queues and containers the coordinator itself uses, on an existing storage account: the
// app's own account by default, or one shared by several apps that elect a single leader.
// Declaring them is idempotent (an existing queue or container is left as it is), so every app
// that shares the account can deploy this module; they exist before the first instance starts.

@description('Storage account (in this resource group) that CoordinatorStorage points at.')
param storageAccountName string

@description('Queue names: submissions (JOBS_QUEUE) and chunk messages (WORK_ITEMS_QUEUE).')
param queueNames array

@description('Container names: the leader lease (LEADER_LEASE_CONTAINER) and the input containers named exactly (the app creates JOB_RESULTS_CONTAINER itself).')
param containerNames array

resource storageAccount 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

// `existing`: every StorageV2 account has these services; declaring them would overwrite their
// properties (CORS rules and the like) on a shared account.
resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' existing = {
  parent: storageAccount
  name: 'default'
}

resource queues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = [
  for queueName in queueNames: {
    parent: queueService
    name: queueName
  }
]

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' existing = {
  parent: storageAccount
  name: 'default'
}

resource containers 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = [
  for containerName in containerNames: {
    parent: blobService
    name: containerName
    properties: {
      publicAccess: 'None'
    }
  }
]
