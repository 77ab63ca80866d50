// What an operator watches on Azure: a workbook over the app's events in Application Insights, and
// two log alert rules. The queries are the files in queries/ (docs/operations.md shows the same
// text; test/unit/infra/monitoring.test.ts keeps them equal and checks their events and fields).

@description('Application Insights component (in this resource group) the app logs to.')
param applicationInsightsName string

param location string
param tags object = {}

@description('Optional e-mail address for the alerts; empty: the alerts fire in Azure Monitor without a notification.')
param alertEmailAddress string = ''

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmailAddress)) {
  name: 'ag-${applicationInsightsName}'
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'coordinator'
    enabled: true
    emailReceivers: [
      {
        name: 'operator'
        emailAddress: alertEmailAddress
        useCommonAlertSchema: true
      }
    ]
  }
}

var actions = empty(alertEmailAddress) ? {} : { actionGroups: [actionGroup.id] }

// The leader logs leader.passes once a minute while it leads: none for 3 minutes means no pass for
// at least 2 (no instance holds the lease, or the one that does cannot run its passes).
resource noLeader 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-no-leader-${applicationInsightsName}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Coordinator: no leader for 2 minutes'
    description: 'No leader.passes event for 3 minutes: no instance has led (passed) for at least 2. See docs/operations.md, Alerts.'
    severity: 1
    enabled: true
    scopes: [applicationInsights.id]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('queries/no-leader.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: actions
  }
}

// A job ended failed, or the leader found a job run that had not moved for 15 s and woke it.
resource jobFailedOrStalled 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: 'alert-job-failed-${applicationInsightsName}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Coordinator: a job failed or stalled'
    description: 'job.aggregated with status failed, or job.resume_requested (a run that had not moved). See docs/operations.md, Alerts.'
    severity: 2
    enabled: true
    scopes: [applicationInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('queries/job-failed-or-stalled.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: actions
  }
}

// The workbook's content is queries/workbook.json (the Workbooks "Notebook/1.0" format); its name must be a GUID.
resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: guid(applicationInsights.id, 'coordinator-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'Leader coordinator'
    category: 'workbook'
    sourceId: applicationInsights.id
    serializedData: loadTextContent('queries/workbook.json')
  }
}

output workbookId string = workbook.id
output alertRuleIds array = [noLeader.id, jobFailedOrStalled.id]
